// The option table: every row well formed (one config key, a tool, what is valid, a decision
// about the run key), the configs the tools write read back to the same options, the run key's
// fragments as files written before the table spell them, the command line parsed by kind,
// and docs/OPTIONS.md generated from the table.

#include <gtest/gtest.h>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/results/record_schema.hpp"
#include "options/option_parser.hpp"
#include "options/run_option_outputs.hpp"
#include "options/run_option_rules.hpp"
#include "options/run_option_table.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::apps;
using namespace dmuon::apps::options;

// Parses `args` as `tool` does (the table's flags, then the rules); InputError on bad input.
RunOptions parse(Tool tool, std::vector<std::string> args) {
  CLI::App app{"test"};
  RunOptions o;
  OptionParser<RunOptions> parser(app, run_option_table(), tool, o);
  std::vector<std::string> argv = {"tool"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  parser.apply(o);
  o.given = parser.given();
  apply_rules(o, tool);
  return o;
}

std::string error_of(Tool tool, std::vector<std::string> args) {
  try {
    parse(tool, std::move(args));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string agreed(const RunOptions& o, Tool tool) {
  RunDescription d;
  describe_options(o, tool, d);
  std::string s;
  for (const auto& [k, v] : d.lines()) s += k + " = " + v + "\n";
  return s;
}

TEST(OptionTable, EveryRowIsWellFormed) {
  std::set<std::string> keys, fragments;
  std::set<std::string> key_fields;
  for (const auto& f : results::run_fields())
    if (f.key) key_fields.insert(f.name);
  key_fields.insert("boundary");  // the boundary sub-group's spec (and strictness)
  key_fields.insert("strategy");  // the partition sub-group's strategy
  key_fields.insert("cost_model");
  for (const auto& o : run_option_table()) {
    SCOPED_TRACE(o.flag);
    EXPECT_EQ(o.flag.rfind("--", 0), 0u);
    EXPECT_TRUE(keys.insert(o.key_name()).second) << "duplicate config key";
    EXPECT_NE(o.tools, 0u);
    EXPECT_FALSE(o.help.empty());
    EXPECT_FALSE(o.valid.empty());
    EXPECT_TRUE(o.set && o.values);
    switch (o.key.where) {
      case KeyRole::none: EXPECT_FALSE(o.key.why.empty()) << "not keyed without a reason"; break;
      case KeyRole::field: EXPECT_TRUE(key_fields.count(o.key.name)) << o.key.name; break;
      case KeyRole::plan:
      case KeyRole::run:
        EXPECT_TRUE(fragments.insert(o.key.name).second) << "duplicate fragment label";
        break;
    }
  }
  // What a row excludes or needs is another row (a misspelt key would never fire).
  for (const auto& o : run_option_table())
    for (const auto* pairs : {&o.excludes, &o.requires_given})
      for (const auto& [other, why] : *pairs) {
        EXPECT_TRUE(keys.count(other) && other != o.key_name()) << o.flag << " names " << other;
        EXPECT_FALSE(why.empty()) << o.flag;
      }
}

TEST(OptionTable, ConfigKeysAreTheToolsFlags) {
  for (Tool t : {kInspect, kBench, kProject, kAdvise}) {
    std::set<std::string> names;
    for (const auto& k : config_keys(t)) EXPECT_TRUE(names.insert(k.name).second) << k.name;
    for (const auto& o : run_option_table())
      EXPECT_EQ(names.count(o.key_name()) == 1, o.for_tool(t)) << o.flag << " " << tool_name(t);
  }
  // A measured run's options are not dmuon_project's: a projection config holding them is
  // refused with its line, never ignored.
  const auto project = config_keys(kProject);
  for (const char* measured : {"steps", "warmup", "seed", "check", "device", "repeats"})
    EXPECT_TRUE(std::none_of(project.begin(), project.end(), [&](const config::ConfigKey& k) {
      return k.name == measured;
    })) << measured;
}

// The run key's fragments: a file written before the option table spelled the plan's as
// "pack=<5000000 max_owners_per_group=0 column_balance=on" (its keys keep matching), and a run
// of what older files ran has no run fragment (an older file's empty field): the overlapped DMuon
// schedule, or no dmuon at all; the default, the reference's DMuon schedule, is keyed.
TEST(OptionTable, KeyFragmentsAsOlderFilesSpellThem) {
  const auto d = parse(kBench, {});
  EXPECT_EQ(key_fragments(d, KeyRole::plan),
            "pack=<5000000 max_owners_per_group=0 column_balance=on");
  EXPECT_EQ(key_fragments(d, KeyRole::run), "dmuon_schedule=reference momentum_dtype=grad");
  EXPECT_EQ(key_fragments(parse(kBench, {"--dmuon-schedule", "overlapped"}), KeyRole::run), "");
  EXPECT_EQ(key_fragments(parse(kBench, {"--method", "fsdp-adamw"}), KeyRole::run), "");
  const auto o =
      parse(kBench, {"--no-pack", "--group-key", "site", "--no-column-balance", "--seq-len", "256",
                     "--micro-batch", "2", "--ac", "full", "--fusion", "eager", "--compute-dtype",
                     "fp32", "--flops", "6n", "--dmuon-schedule", "overlapped"});
  EXPECT_EQ(key_fragments(o, KeyRole::plan),
            "pack=off max_owners_per_group=0 column_balance=off group_key=site");
  EXPECT_EQ(key_fragments(o, KeyRole::run),
            "seq_len=256 micro_batch=2 ac=full compute_dtype=fp32 fusion=eager flops=6n");
}

// What a run records as its config reads back (through --config's reader) to the same options.
TEST(OptionTable, RecordedConfigReadsBackToTheSameRun) {
  const auto o = parse(kBench, {"--topology",
                                "llm",
                                "--set",
                                "L=3",
                                "--boundary",
                                "strict:recommended",
                                "--owner-strategy",
                                "lpt_refine",
                                "--pack-threshold",
                                "1000",
                                "--route",
                                "ndim=1=adamw",
                                "--replicate",
                                "2",
                                "--reshard",
                                "z2",
                                "--prefetch",
                                "2",
                                "--comm-dtype",
                                "bf16",
                                "--reduce-dtype",
                                "fp32",
                                "--clip-norm",
                                "0.5",
                                "--clip-norm-type",
                                "inf",
                                "--accum",
                                "3",
                                "--seq-len",
                                "64",
                                "--micro-batch",
                                "2",
                                "--ac",
                                "selective",
                                "--steps",
                                "3",
                                "--seed",
                                "99",
                                "--check"});
  const auto path = (std::filesystem::temp_directory_path() /
                     ("option_table_test_" + std::to_string(::getpid()) + ".yaml"))
                        .string();
  std::ofstream(path) << config_yaml(o, kBench);
  const auto keys = config_keys(kBench);
  std::vector<std::string> args;
  for (const auto& a : config::config_to_args(config::load_config(path, keys), keys))
    args.push_back(a);
  std::filesystem::remove(path);
  const auto back = parse(kBench, args);
  EXPECT_EQ(agreed(back, kBench), agreed(o, kBench)) << config_yaml(o, kBench);
}

TEST(OptionTable, ParsesByKindAndAppliesTheRules) {
  const auto o = parse(kBench, {"--method", "dmuon,fsdp-adamw", "--method", "dmuon",
                                "--owner-strategy", "round-robin"});
  EXPECT_EQ(o.methods.size(), 2u);  // once each, in the order given
  EXPECT_EQ(o.owner_strategies.front(), partition::Strategy::round_robin);
  EXPECT_TRUE(o.was_given("method"));
  EXPECT_FALSE(o.was_given("steps"));
  EXPECT_EQ(error_of(kBench, {"--steps", "0"}),
            "--steps '0' is invalid (valid: an integer 1..100000)");
  EXPECT_EQ(error_of(kBench, {"--prefetch", ""}),
            "--prefetch has an empty value (valid: an integer 0..64)");
  EXPECT_EQ(error_of(kBench, {"--inject-nan-step", "-1"}),
            "--inject-nan-step '-1' is invalid (valid: an integer 1..200000)");
  EXPECT_NE(error_of(kBench, {"--steps", "2", "--steps", "3"}), "");
  EXPECT_EQ(error_of(kBench, {"--no-pack", "--pack-threshold", "7"}),
            "--no-pack and --pack-threshold both set packing: give one");
  EXPECT_EQ(error_of(kBench, {"--seq-len", "8"}),
            "--seq-len and --micro-batch go together (tokens per rank = their product)");
  EXPECT_EQ(error_of(kBench, {"--ac", "full"}),
            "--ac full needs --seq-len (the activation work it recomputes)");
  EXPECT_EQ(error_of(kBench, {"--clip-norm-type", "inf"}),
            "--clip-norm-type needs --clip-norm (the threshold)");
  // Parallelisms not modelled yet: refused as such, their trivial value accepted (config too).
  // Expert parallelism is run (its token all-to-alls too), planned, projected and searched.
  EXPECT_EQ(error_of(kAdvise, {"--ep", "2", "--world-size", "2", "--machine", "h200"}), "");
  EXPECT_EQ(error_of(kProject, {"--ep", "4", "--seq-len", "8", "--micro-batch", "1", "--world-size",
                                "4", "--machine", "h200"}),
            "");
  EXPECT_EQ(error_of(kBench, {"--ep", "4"}), "");
  EXPECT_EQ(error_of(kInspect, {"--ep", "4"}), "");
  EXPECT_EQ(error_of(kBench, {"--ep", "4", "--seq-len", "8", "--micro-batch", "1"}), "");
  // Pipeline parallelism is projected (with TP and EP, without CP) and run by dmuon_bench (1F1B
  // stages of data parallelism, on the step work), not searched or inspected.
  EXPECT_EQ(error_of(kBench, {"--pp", "2", "--seq-len", "8", "--micro-batch", "1"}), "");
  EXPECT_EQ(error_of(kBench, {"--pp", "2", "--seq-len", "8", "--micro-batch", "1", "--accum", "4",
                              "--pp-microbatches", "2"}),
            "");
  EXPECT_EQ(error_of(kBench, {"--pp", "2"}),
            "--pp 2 needs --seq-len (the stages' activation work sets the pipeline's bubble and "
            "the size of the stage boundary's messages)");
  EXPECT_EQ(error_of(kBench, {"--pp", "2", "--tp", "2", "--seq-len", "8", "--micro-batch", "1"}),
            "--pp 2 with --tp 2: not run together by the engine yet (valid: dmuon_project; here "
            "--pp with data and expert parallelism: --replicate, --ep)");
  EXPECT_EQ(error_of(kInspect, {"--pp", "2"}),
            "--pp 2: pipeline parallelism is projected (dmuon_project) or run (dmuon_bench), not "
            "searched or inspected (here --pp 1)");
  // --param-dtype: the projection's (the engine keeps fp32 masters).
  EXPECT_NE(error_of(kBench, {"--param-dtype", "bf16"}).find("--param-dtype"), std::string::npos);
  EXPECT_EQ(error_of(kProject, {"--param-dtype", "bf16", "--world-size", "4", "--machine", "h200"}),
            "");
  EXPECT_EQ(error_of(kAdvise, {"--pp", "2", "--world-size", "4", "--machine", "h200"})
                .rfind("--pp 2: pipeline parallelism is projected", 0),
            0u);
  const std::vector<std::string> pp = {"--pp", "2", "--world-size", "4", "--machine", "h200"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), pp.begin(), pp.end());
    return more;
  };
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1"})), "");
  EXPECT_EQ(error_of(kProject, pp),
            "--pp 2 needs --seq-len (the stages' activation work sets the pipeline's bubble)");
  EXPECT_EQ(error_of(kProject, {"--pp-chunks", "2", "--world-size", "4", "--machine", "h200"}),
            "--pp-chunks 2 needs --pp P > 1 (it splits each pipeline rank's blocks; valid: "
            "--pp 2..)");
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--tp", "2"})), "");
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--ep", "2"})), "");
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--cp", "2"})),
            "--pp 2 with --cp: not modelled together yet (valid: --pp with data, tensor and "
            "expert parallelism: --replicate, --tp, --ep)");
  // --pp-microbatches: runs of the schedule that divide the step's micro-batches, under --pp.
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--accum", "4",
                                     "--pp-microbatches", "2"})),
            "");
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--accum", "4",
                                     "--pp-microbatches", "3"})),
            "--pp-microbatches 3 does not divide --accum 4 (valid: a divisor of --accum: the "
            "step's micro-batches in runs of equal size)");
  EXPECT_EQ(
      error_of(kProject, {"--pp-microbatches", "2", "--world-size", "4", "--machine", "h200"}),
      "--pp-microbatches 2 needs --pp P > 1 (it sizes a run of the pipeline schedule; valid: "
      "--pp 2..)");
  EXPECT_EQ(error_of(kProject, with({"--seq-len", "8", "--micro-batch", "1", "--output", "x.h5"}))
                .rfind("--pp 2: a pipeline projection prints its tables or --json", 0),
            0u);
  // Context parallelism is projected and searched only, with activation work that 2C chunks
  // divide.
  EXPECT_EQ(error_of(kBench, {"--cp", "8"}),
            "--cp 8 is projected and searched, not run (valid: dmuon_project, dmuon_advise; here "
            "only 1)");
  EXPECT_EQ(error_of(kInspect, {"--cp", "2"}).rfind("--cp 2 is projected and searched", 0), 0u);
  EXPECT_EQ(error_of(kAdvise, {"--cp", "2", "--seq-len", "8", "--micro-batch", "1", "--world-size",
                               "8", "--machine", "h200"}),
            "");
  EXPECT_EQ(
      error_of(kProject, {"--cp", "2", "--tokens", "64", "--world-size", "4", "--machine", "h200"}),
      "--cp 2 needs --seq-len (the activation work it splits over the CP group)");
  EXPECT_EQ(error_of(kProject, {"--cp", "3", "--seq-len", "8", "--micro-batch", "1", "--world-size",
                                "6", "--machine", "h200"}),
            "--seq-len 8 does not split into the 2 x 3 chunks of --cp 3 (valid: a multiple of 6)");
  EXPECT_EQ(error_of(kProject, {"--cp", "2", "--tp", "2", "--seq-len", "8", "--micro-batch", "1",
                                "--world-size", "8", "--machine", "h200"}),
            "");
  EXPECT_EQ(error_of(kProject, {"--cp", "2", "--seq-len", "8", "--micro-batch", "1", "--world-size",
                                "4", "--machine", "h200"}),
            "");
  EXPECT_EQ(error_of(kProject, {"--cp", "65"}), "--cp '65' is invalid (valid: an integer 1..64)");
  // Sequence parallelism is projected, with a TP group and activation work, and not run.
  EXPECT_EQ(error_of(kBench, {"--sequence-parallel"})
                .rfind("--sequence-parallel is projected, "
                       "not run (valid: dmuon_project, "
                       "dmuon_advise)",
                       0),
            0u);
  EXPECT_EQ(error_of(kProject, {"--sequence-parallel", "--seq-len", "8", "--micro-batch", "1",
                                "--world-size", "4", "--machine", "h200"})
                .rfind("--sequence-parallel needs --tp T > 1", 0),
            0u);
  EXPECT_EQ(error_of(kProject, {"--sequence-parallel", "--tp", "2", "--tokens", "64",
                                "--world-size", "4", "--machine", "h200"}),
            "--sequence-parallel needs --seq-len (the activation work it splits over the TP "
            "group)");
  EXPECT_EQ(error_of(kProject, {"--sequence-parallel", "--tp", "2", "--seq-len", "8",
                                "--micro-batch", "1", "--world-size", "4", "--machine", "h200"}),
            "");
  EXPECT_EQ(error_of(kBench, {"--ep", "1", "--pp", "1", "--cp", "1"}), "");
  EXPECT_EQ(error_of(kProject, {"--ep", "0"}), "--ep '0' is invalid (valid: an integer 1..256)");
  // A flag of another tool is not this tool's.
  EXPECT_NE(error_of(kBench, {"--machine", "h100-ndr"}), "");
  EXPECT_NE(error_of(kProject, {"--steps", "3"}), "");
}

TEST(OptionTable, EveryRankAgreesOnWhatDecidesTheRun) {
  const auto a = agreed(parse(kBench, {"--output", "x.h5", "--json"}), kBench);
  const auto b = agreed(parse(kBench, {"--output", "y.h5"}), kBench);
  EXPECT_EQ(a, b);                                  // the path and the format are rank 0's
  EXPECT_NE(a, agreed(parse(kBench, {}), kBench));  // whether there is a file is everyone's
  EXPECT_NE(agreed(parse(kBench, {"--ac", "full", "--seq-len", "8", "--micro-batch", "1"}), kBench),
            agreed(parse(kBench, {"--seq-len", "8", "--micro-batch", "1"}), kBench));
}

// docs/OPTIONS.md is what the table generates (regenerate: dmuon_inspect --options-markdown).
// What a config both tools read cannot hold (dmuon_project's options alone) is said beside it
// in the advisor's "Project it" line: only what differs from its default, in table order;
// --machine and --world-size are said there already.
TEST(OptionTable, ProjectionOnlyFlagsAreTheNonDefaultOnes) {
  RunOptions o;
  EXPECT_EQ(options::projection_only_flags(o), "");
  o.projection.machine = "h100-ndr";
  o.projection.world_sizes = {8};
  EXPECT_EQ(options::projection_only_flags(o), "");
  o.engine.step.param = kernels::Dtype::bf16;
  o.workload.attention_kernel = "cudnn";
  EXPECT_EQ(options::projection_only_flags(o), " --param-dtype bf16 --attention-kernel cudnn");
}

TEST(OptionTable, DocsAreCurrent) {
  std::ifstream f(std::string(DMUON_SOURCE_DIR) + "/docs/OPTIONS.md");
  std::stringstream doc;
  doc << f.rdbuf();
  EXPECT_EQ(doc.str(), options_markdown())
      << "docs/OPTIONS.md is stale: build/bin/dmuon_inspect --options-markdown > docs/OPTIONS.md";
}

}  // namespace
