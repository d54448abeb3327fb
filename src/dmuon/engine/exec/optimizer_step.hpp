#pragma once
// The optimizer step of one parameter on the host (SPEC §7), shared by the host backend and
// the one-process --check reference so the two cannot drift apart: Muon split into prepare
// (momentum + Nesterov input), Newton–Schulz and apply (timed separately), and AdamW. Every
// call returns what it saw non-finite, counted inside the kernel's own pass (no extra pass:
// the caller decides to abort, outside the timed phases' arithmetic).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "dmuon/engine/step/optimizer_config.hpp"
#include "kernels/adamw.hpp"
#include "kernels/muon.hpp"

namespace dmuon::engine {

class HostOptimizer {
 public:
  explicit HostOptimizer(const kernels::MuonConfig& muon);
  const kernels::MuonConfig& muon() const { return muon_; }

  /// momentum ← (step 1 ? g : μ·momentum + g); input ← Nesterov input. Returns the number of
  /// non-finite gradient values.
  std::size_t prepare(const float* grad, float* momentum, float* input, std::size_t n,
                      long step) const;
  /// In place: x ← NS(x) for a rows×cols matrix. Throws KernelError naming `name` if x is not
  /// finite (the norm's reduction sees it for free).
  void newton_schulz(float* x, std::int64_t rows, std::int64_t cols, std::string_view name);
  /// weight ← (1 − lr·wd)·weight − lr·scale(rows, cols)·update over n elements (a whole
  /// parameter or one shard of it). Returns the number of non-finite results.
  std::size_t apply(float* weight, const float* update, std::size_t n, std::int64_t rows,
                    std::int64_t cols) const;
  /// One AdamW step; returns the number of non-finite gradient values.
  std::size_t adamw(float* weight, const float* grad, float* exp_avg, float* exp_avg_sq,
                    std::size_t n, long step) const;
  /// Newton–Schulz scratch allocated so far (one workspace per matrix shape).
  std::int64_t workspace_bytes() const;
  /// The workspace of one rows×cols matrix (0 before its first Newton–Schulz).
  std::int64_t workspace_bytes(std::int64_t rows, std::int64_t cols) const;

 private:
  kernels::MuonConfig muon_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<kernels::host::NsWorkspace>>
      workspaces_;
};

}  // namespace dmuon::engine
