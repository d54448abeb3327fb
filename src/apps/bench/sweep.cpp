#include "bench/sweep.hpp"

#include <algorithm>
#include <filesystem>

#include "common/plan_setup.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"

namespace dmuon::apps::bench {

std::string BoundaryChoice::label() const {
  return word == spec ? spec : word + " " + spec;
}

std::vector<std::string> builtin_sweep_items() {
  return {"default", "strict:recommended", "strict:incomplete", "lenient:incomplete"};
}

std::vector<std::string> default_sweep_items(const std::string& topology,
                                             const std::string& config_dir, std::string* source) {
  const std::filesystem::path file =
      std::filesystem::path(config_dir) / "sweeps" / (topology + ".yaml");
  std::error_code ec;
  if (!config_dir.empty() && std::filesystem::is_regular_file(file, ec)) {
    // The sweep alone: any other key in the file is refused with its line, never ignored.
    const auto c = config::load_config(file.string(),
                                       {{"boundary", config::KeyKind::list, "the boundary sweep"}});
    if (const auto* e = c.find("boundary"); e != nullptr && !e->values.empty()) {
      if (source) *source = file.string();
      return e->values;
    }
  }
  if (source) *source = "built-in";
  return builtin_sweep_items();
}

std::vector<BoundaryChoice> resolve_sweep(const std::vector<std::string>& items, bool lenient,
                                          const model::Topology& t, bool skip_missing,
                                          int* repeated) {
  std::vector<BoundaryChoice> out;
  if (repeated) *repeated = 0;
  for (const auto& item : items) {
    const auto b = config::parse_boundary_item(item);
    BoundaryChoice c;
    c.word = b.spec;
    c.strict = b.strict.value_or(!lenient);
    if (skip_missing) {
      if (c.word == "recommended" &&
          (t.recommended_boundary.empty() || t.recommended_boundary == "default"))
        continue;
      if (c.word == "incomplete" && t.incomplete_boundary.empty()) continue;
    }
    if (c.word.empty()) throw InputError("--boundary needs a value");
    c.spec = resolve_boundary_alias(c.word, t);
    const bool seen = std::any_of(out.begin(), out.end(), [&](const BoundaryChoice& o) {
      return o.word == c.word && o.spec == c.spec && o.strict == c.strict;
    });
    if (seen) {
      if (repeated) ++*repeated;
      continue;
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) throw InputError("the boundary sweep is empty");
  return out;
}

}  // namespace dmuon::apps::bench
