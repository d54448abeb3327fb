#include "dmuon/engine/reference_file.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dmuon/base/error.hpp"

namespace dmuon::engine {

namespace {
constexpr const char* kMagic = "DMUON-REFERENCE 1";
}

std::string reference_header(const model::ModuleTree& tree, const plan::Plan& plan,
                             const EngineOptions& o, int world) {
  nlohmann::json h;
  // The settings reference_weights reads, and nothing else (layouts and wire types do not
  // change the one-process arithmetic).
  h["muon"] = o.step.method != Method::fsdp_adamw;
  h["seed"] = o.run.seed;
  h["steps"] = o.run.total_steps();
  h["global_samples"] = o.step.global_samples(world);
  h["compute"] = compute_name(o.step.compute);
  h["ns"] = std::string(kernels::to_string(o.backend.ns));
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
                     const std::vector<std::vector<float>>& weights) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(fmt::format("cannot write reference file '{}'", tmp));
    f << kMagic << '\n' << header << '\n';
    for (const auto& w : weights)
      f.write(reinterpret_cast<const char*>(w.data()),
              static_cast<std::streamsize>(w.size() * sizeof(float)));
    if (!f) throw InputError(fmt::format("writing reference file '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw InputError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
}

std::vector<std::vector<float>> read_reference(const std::string& path, const std::string& header,
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
  std::vector<std::vector<float>> w;
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
  return w;
}

}  // namespace dmuon::engine
