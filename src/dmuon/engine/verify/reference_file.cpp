#include "dmuon/engine/verify/reference_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/grad_clip.hpp"

namespace dmuon::engine {

namespace {

constexpr const char* kMagic = "DMUON-REFERENCE 2";

nlohmann::json regime_json(const AdamwEpsRegime* regime) {
  nlohmann::json j;
  j["bound_per_step"] = regime ? regime->bound_per_step : 0.0;
  nlohmann::json elements = nlohmann::json::array();
  if (regime)
    for (std::size_t p = 0; p < regime->elements.size(); ++p)
      for (const auto& [element, steps] : regime->elements[p])
        elements.push_back({p, element, steps});
  j["elements"] = elements;
  return j;
}

// The regime line of a file for `tree`; throws InputError naming the file when it is damaged.
std::shared_ptr<const AdamwEpsRegime> parse_regime(const std::string& path, const std::string& line,
                                                   const model::ModuleTree& tree) {
  auto regime = std::make_shared<AdamwEpsRegime>();
  regime->elements.assign(tree.parameter_order().size(), {});
  try {
    const auto j = nlohmann::json::parse(line);
    regime->bound_per_step = j.at("bound_per_step").get<double>();
    for (const auto& e : j.at("elements")) {
      const auto p = e.at(0).get<std::size_t>();
      const auto element = e.at(1).get<std::int64_t>();
      const int steps = e.at(2).get<int>();
      if (p >= regime->elements.size() || element < 0 || steps < 1 ||
          element >= tree.parameter(tree.parameter_order()[p]).numel())
        throw InputError("an element out of range");
      regime->elements[p].emplace_back(element, steps);
    }
  } catch (const std::exception& e) {
    throw InputError(
        fmt::format("reference file '{}' has a damaged eps-regime line ({})", path, e.what()));
  }
  for (auto& flagged : regime->elements) std::sort(flagged.begin(), flagged.end());
  return regime;
}

}  // namespace

std::string reference_header(const model::ModuleTree& tree, const plan::Plan& plan,
                             const EngineOptions& o, int world) {
  nlohmann::json h;
  // The settings reference_weights reads, and nothing else (layouts and wire types do not
  // change the one-process arithmetic).
  h["muon"] = traits(o.step.method).muon;
  h["seed"] = o.run.seed;
  h["steps"] = o.run.total_steps();
  h["global_samples"] = o.step.global_samples(world);
  h["compute"] = compute_name(o.step.compute);
  h["ns"] = std::string(kernels::to_string(o.backend.ns));
  // Clipping and accumulation change the step (grad_clip.hpp, accumulation.hpp).
  h["clip_norm"] = o.step.clip_norm;
  if (o.step.clip_norm > 0) h["clip_norm_type"] = clip_norm_type_name(o.step.clip_norm_type);
  h["accum"] = o.step.accum;
  nlohmann::json params = nlohmann::json::array();
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    params.push_back(
        {p.name, p.numel(),
         plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0 && plan.muon(pid)});
  }
  h["parameters"] = params;
  return h.dump();
}

void write_reference(const std::string& path, const std::string& header,
                     const std::vector<std::vector<float>>& weights, const AdamwEpsRegime* regime) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(fmt::format("cannot write reference file '{}'", tmp));
    f << kMagic << '\n' << header << '\n' << regime_json(regime).dump() << '\n';
    for (const auto& w : weights)
      f.write(reinterpret_cast<const char*>(w.data()),
              static_cast<std::streamsize>(w.size() * sizeof(float)));
    if (!f) throw InputError(fmt::format("writing reference file '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw InputError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
}

ReferenceWeights read_reference_check(const std::string& path, const std::string& header,
                                      const model::ModuleTree& tree) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("reference file '{}' cannot be opened", path));
  std::string magic, stored;
  std::getline(f, magic);
  if (magic != kMagic)
    throw InputError(fmt::format("'{}' is not a dmuon reference file (first line '{}', want '{}')",
                                 path, magic.substr(0, 40), kMagic));
  std::getline(f, stored);
  if (stored != header)
    throw InputError(fmt::format(
        "reference file '{}' was computed for other settings or another model (header {} ; "
        "this run needs {})",
        path, stored.substr(0, 200), header.substr(0, 200)));
  std::string regime_line;
  std::getline(f, regime_line);
  ReferenceWeights ref;
  ref.eps_regime = parse_regime(path, regime_line, tree);
  auto& w = ref.weights;
  for (int pid : tree.parameter_order()) {
    w.emplace_back(static_cast<std::size_t>(tree.parameter(pid).numel()));
    f.read(reinterpret_cast<char*>(w.back().data()),
           static_cast<std::streamsize>(w.back().size() * sizeof(float)));
    if (!f)
      throw InputError(fmt::format("reference file '{}' is truncated at parameter '{}'", path,
                                   tree.parameter(pid).name));
  }
  if (f.peek() != std::char_traits<char>::eof())
    throw InputError(fmt::format("reference file '{}' has bytes after the last parameter", path));
  return ref;
}

std::vector<std::vector<float>> read_reference(const std::string& path, const std::string& header,
                                               const model::ModuleTree& tree) {
  return read_reference_check(path, header, tree).weights;
}

}  // namespace dmuon::engine
