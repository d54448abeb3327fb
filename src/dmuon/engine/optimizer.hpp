#pragma once
// The optimizer math both the engine and the reference call, so they cannot drift apart:
// Muon split into momentum / Newton–Schulz / apply (timed separately), and AdamW.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "kernels/adamw.hpp"
#include "kernels/muon.hpp"

namespace dmuon::engine {

/// Newton–Schulz workspaces, one per matrix shape, created on first use and reused.
class NsWorkspaces {
 public:
  kernels::host::NsWorkspace& get(std::int64_t rows, std::int64_t cols);
  std::int64_t bytes() const;

 private:
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<kernels::host::NsWorkspace>> ws_;
};

inline const kernels::MuonConfig& muon_config() {
  static const kernels::MuonConfig c{};
  return c;
}
inline const kernels::AdamWConfig& adamw_config() {
  static const kernels::AdamWConfig c{};
  return c;
}

}  // namespace dmuon::engine
