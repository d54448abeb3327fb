// YAML configs: valid files, unknown keys and syntax errors with FILE:LINE, the command-line
// override rule, boundary items, and every shipped config.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/config/config_origin.hpp"
#include "dmuon/model/topology.hpp"
#include "options/run_option_outputs.hpp"
#include "sample_record.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::config;
namespace fs = std::filesystem;
using dmuon::results::fixture::TempDir;

// dmuon_bench's keys, from its option table.
const std::vector<ConfigKey>& bench_config_keys() {
  static const auto keys = apps::options::config_keys(apps::options::kBench);
  return keys;
}

std::string write(const TempDir& d, const std::string& name, const std::string& text) {
  const auto p = d.file(name);
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::string& path) {
  try {
    load_config(path, bench_config_keys());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFile, LoadsValues) {
  TempDir d("cfg");
  const auto p = write(d, "a.yaml",
                       "# comment\n"
                       "topology: moe\n"
                       "set: [E=4, d=64]\n"
                       "boundary:\n"
                       "  - default\n"
                       "  - {spec: recommended, strict: true}\n"
                       "  - {spec: 'types:Expert', strict: false}\n"
                       "lenient: false\n"
                       "check: yes\n"
                       "steps: 5\n");
  const auto c = load_config(p, bench_config_keys());
  ASSERT_EQ(c.entries.size(), 6u);
  EXPECT_EQ(c.find("topology")->values, std::vector<std::string>{"moe"});
  EXPECT_EQ(c.find("topology")->line, 2);
  EXPECT_EQ(c.find("set")->values, (std::vector<std::string>{"E=4", "d=64"}));
  EXPECT_EQ(c.find("boundary")->values,
            (std::vector<std::string>{"default", "strict:recommended", "lenient:types:Expert"}));
  EXPECT_EQ(c.find("check")->values, std::vector<std::string>{"true"});
  EXPECT_EQ(config_to_args(c, bench_config_keys()),
            (std::vector<std::string>{"--topology=moe", "--set=E=4", "--set=d=64",
                                      "--boundary=default", "--boundary=strict:recommended",
                                      "--boundary=lenient:types:Expert", "--check", "--steps=5"}));
  EXPECT_TRUE(
      load_config(write(d, "empty.yaml", "# nothing\n"), bench_config_keys()).entries.empty());
}

TEST(ConfigFile, UnknownKeyNamesFileLineAndValidKeys) {
  TempDir d("cfg_unknown");
  const auto p = write(d, "u.yaml", "topology: moe\n\nboundry: default\n");
  const auto e = error_of(p);
  EXPECT_NE(e.find(p + ":3: unknown config key 'boundry'"), std::string::npos) << e;
  EXPECT_NE(e.find("valid keys: topology, preset"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(ConfigFile, SyntaxErrorNamesFileLineColumn) {
  TempDir d("cfg_syntax");
  const auto p = write(d, "s.yaml", "topology: moe\nboundary: [default, recommended\nsteps: 3\n");
  const auto e = error_of(p);
  EXPECT_NE(e.find(p + ":"), std::string::npos) << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  const auto p2 = write(d, "t.yaml", "topology: moe\n  steps: 3\n");
  EXPECT_NE(error_of(p2).find(p2 + ":2:"), std::string::npos) << error_of(p2);
}

TEST(ConfigFile, OtherBadInput) {
  TempDir d("cfg_bad");
  EXPECT_NE(error_of(d.file("missing.yaml")).find("cannot read config file"), std::string::npos);
  EXPECT_NE(error_of(write(d, "l.yaml", "topology: [moe, vla]\n"))
                .find(":1: config key 'topology' needs a single value"),
            std::string::npos);
  EXPECT_NE(error_of(write(d, "f.yaml", "check: maybe\n")).find("must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(write(d, "n.yaml", "steps:\n")).find("has no value"), std::string::npos);
  EXPECT_NE(error_of(write(d, "dup.yaml", "steps: 1\nsteps: 2\n")).find(":2: duplicate config key"),
            std::string::npos);
  EXPECT_NE(error_of(write(d, "b.yaml", "boundary: [{spec: default, strict: true, x: 1}]\n"))
                .find("unknown boundary item key 'x'"),
            std::string::npos);
  EXPECT_NE(error_of(write(d, "s.yaml", "- topology\n")).find("a mapping of keys"),
            std::string::npos);
}

std::vector<std::string> expand(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ExpandedArgs e(static_cast<int>(argv.size()), argv.data(), bench_config_keys());
  EXPECT_EQ(e.argc(), static_cast<int>(e.args().size()));
  EXPECT_EQ(e.argv()[e.argc()], nullptr);
  return e.args();
}

TEST(ConfigFile, CommandLineOverridesTheFile) {
  TempDir d("cfg_override");
  const auto p =
      write(d, "o.yaml", "topology: moe\nsteps: 5\nset: [E=4]\nboundary: [default, incomplete]\n");
  EXPECT_EQ(expand({"app", "--config", p}),
            (std::vector<std::string>{"app", "--topology=moe", "--steps=5", "--set=E=4",
                                      "--boundary=default", "--boundary=incomplete"}));
  // Scalars and lists given on the command line replace the file's; --set appends.
  EXPECT_EQ(
      expand({"app", "--steps", "9", "--config=" + p, "--boundary=recommended", "--set", "E=8"}),
      (std::vector<std::string>{"app", "--topology=moe", "--set=E=4", "--steps", "9",
                                "--boundary=recommended", "--set", "E=8"}));
  EXPECT_EQ(expand({"app", "--steps", "2"}), (std::vector<std::string>{"app", "--steps", "2"}));
  EXPECT_THROW(expand({"app", "--config"}), InputError);
  EXPECT_THROW(expand({"app", "--config", p, "--config", p}), InputError);
}

// An error about a value from the file says where in the file it is: by the flag it names, or
// by the quoted value; never for a flag the command line gave instead.
TEST(ConfigFile, ErrorsAboutItsValuesNameFileAndLine) {
  TempDir d("cfg_origin");
  const auto p = write(d, "o.yaml", "topology: moe\nsteps: abc\nowner_strategy: zzz\n");
  expand({"app", "--config", p});
  EXPECT_EQ(config_origin_note("--steps: 'abc' is invalid"), " (config " + p + ":2, key 'steps')");
  EXPECT_EQ(config_origin_note("unknown owner strategy 'zzz' (valid: lpt)"),
            " (config " + p + ":3, key 'owner_strategy')");
  EXPECT_EQ(config_origin_note("--steps-other is bad"), "");  // a longer flag is another flag
  EXPECT_EQ(config_origin_note("unrelated"), "");
  // A bare number is no evidence: '2' may be any flag's value.
  const auto q = write(d, "n.yaml", "replicate: 2\n");
  expand({"app", "--config", q});
  EXPECT_EQ(config_origin_note("--tp 2 and R x G: '2' is invalid"), "");
  EXPECT_EQ(config_origin_note("--replicate 2 is invalid"),
            " (config " + q + ":1, key 'replicate')");
  expand({"app", "--config", p});
  EXPECT_EQ(config_origin_note(p + ":2: something"), "");  // already names the file
  // The command line replaced steps: its errors are not the file's.
  expand({"app", "--config", p, "--steps", "x"});
  EXPECT_EQ(config_origin_note("--steps: 'x' is invalid"), "");
  // Without --config, nothing is noted.
  expand({"app", "--steps", "x"});
  EXPECT_EQ(config_origin_note("unknown owner strategy 'zzz'"), "");
}

TEST(ConfigFile, BoundaryItems) {
  auto b = parse_boundary_item("strict:types:A,B");
  EXPECT_EQ(b.spec, "types:A,B");
  EXPECT_EQ(b.strict, true);
  b = parse_boundary_item("lenient:incomplete");
  EXPECT_EQ(b.spec, "incomplete");
  EXPECT_EQ(b.strict, false);
  b = parse_boundary_item("paths:layers\\.[0-9]+");
  EXPECT_EQ(b.spec, "paths:layers\\.[0-9]+");
  EXPECT_FALSE(b.strict.has_value());
}

TEST(ConfigKeys, OneFlagPerKey) {
  const auto& keys = bench_config_keys();
  for (const auto& k : keys) {
    EXPECT_EQ(k.flag().rfind("--", 0), 0u);
    EXPECT_EQ(k.flag().find('_'), std::string::npos) << k.flag();
    EXPECT_EQ(std::count_if(keys.begin(), keys.end(),
                            [&](const ConfigKey& o) { return o.name == k.name; }),
              1);
  }
  ConfigKey k;
  k.name = "owner_strategy";
  EXPECT_EQ(k.flag(), "--owner-strategy");
}

TEST(ShippedConfigs, AllLoad) {
  const fs::path dir = fs::path(DMUON_SOURCE_DIR) / "configs";
  std::vector<fs::path> files;
  for (const auto& sub : {dir, dir / "paper"})
    for (const auto& e : fs::directory_iterator(sub))
      if (e.path().extension() == ".yaml") files.push_back(e.path());
  ASSERT_GE(files.size(), 12u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    ConfigValues c;
    ASSERT_NO_THROW(c = load_config(f.string(), bench_config_keys()));
    EXPECT_NO_THROW(config_to_args(c, bench_config_keys()));
    EXPECT_EQ(c.find("output"), nullptr);  // a shipped config writes no file unless asked
    if (const auto* t = c.find("topology")) {
      // A built-in topology with a real preset, and boundary words it defines.
      const auto& info = model::topology_info(t->values.at(0));
      const auto* preset = c.find("preset");
      ASSERT_NE(preset, nullptr);
      EXPECT_NE(std::find(info.presets.begin(), info.presets.end(), preset->values.at(0)),
                info.presets.end());
      const auto topo = model::build_topology(info.name, "tiny");
      for (const auto& item : c.find("boundary")->values) {
        const auto spec = parse_boundary_item(item).spec;
        if (spec == "incomplete") {
          EXPECT_FALSE(topo.incomplete_boundary.empty());
        }
        if (spec == "recommended") {
          EXPECT_FALSE(topo.recommended_boundary.empty());
        }
      }
    } else {
      EXPECT_NE(c.find("topology_file"), nullptr);
    }
  }
}

// The main job's sweeps (configs/sweeps/<topology>.yaml) hold the boundary list alone, for a
// built-in topology, with the boundary words it defines: nothing in them can be ignored.
TEST(ShippedConfigs, SweepsHoldTheSweepAlone) {
  const fs::path dir = fs::path(DMUON_SOURCE_DIR) / "configs" / "sweeps";
  const std::vector<ConfigKey> sweep_only = {{"boundary", KeyKind::list, ""}};
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().string());
    ConfigValues c;
    ASSERT_NO_THROW(c = load_config(e.path().string(), sweep_only));
    ASSERT_EQ(c.entries.size(), 1u);
    const auto topo = model::build_topology(e.path().stem().string(), "tiny");
    for (const auto& item : c.entries.front().values) {
      const auto spec = parse_boundary_item(item).spec;
      if (spec == "incomplete") {
        EXPECT_FALSE(topo.incomplete_boundary.empty());
      }
      if (spec == "recommended") {
        EXPECT_FALSE(topo.recommended_boundary.empty());
      }
    }
    ++n;
  }
  EXPECT_EQ(n, static_cast<int>(model::builtin_topologies().size()));
}

}  // namespace
