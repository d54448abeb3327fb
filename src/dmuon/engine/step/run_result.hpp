#pragma once
// What one engine run measured, reduced over ranks (valid on every rank after run_engine).
// Reductions: per step, the max over ranks; then the median over the measured steps.

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/engine/step/phase.hpp"

namespace dmuon::engine {

// The communicators (base/rank_grid.hpp), as the engine's and the projection's code names them.
using dmuon::CommGroup;
using dmuon::kCommGroupCount;

/// A channel is (communicator, kind): the shard group (a row of G ranks; all ranks in 1-D),
/// with HSDP the replicate group (a column of R ranks), the whole world (--clip-norm's one
/// all-reduce of the gradient norm) and with --tp the TP group (the TP exchange's gathers and
/// scatters). Communicators: base/rank_grid.hpp.
inline constexpr std::size_t kChannelCount = kCommGroupCount * comm::kCollectiveKindCount;
inline constexpr std::size_t channel_index(CommGroup g, comm::CollectiveKind k) {
  return static_cast<std::size_t>(g) * comm::kCollectiveKindCount + static_cast<std::size_t>(k);
}
inline constexpr comm::CollectiveKind channel_kind(std::size_t channel) {
  return static_cast<comm::CollectiveKind>(channel % comm::kCollectiveKindCount);
}
inline constexpr CommGroup channel_group(std::size_t channel) {
  return static_cast<CommGroup>(channel / comm::kCollectiveKindCount);
}
/// Shard-group channels by kind name ("broadcast", ...); the others prefixed by their group:
/// "replicate_reduce" (DMuon's stage-2 reduce), "replicate_broadcast", "replicate_all_reduce",
/// "world_all_reduce" (--clip-norm's gradient norm), "tp_gather", "tp_scatter".
std::string channel_name(std::size_t channel);
/// The channel a name denotes (channel_name's inverse); false for an unknown name.
bool parse_channel_name(const std::string& name, std::size_t& channel);

struct KindResult {
  std::int64_t calls_per_step =
      0;  ///< max over ranks (every rank takes part in the same calls here)
  std::int64_t bytes_measured = 0;  ///< max over ranks of the per-rank volume per step
  std::int64_t bytes_formula = 0;   ///< max over ranks of the expected volume
  /// Bandwidth in the nccl-tests sense (comm/bus_bandwidth.hpp): the step's message bytes S
  /// (max over ranks), the group size n, and the wall ms with one of the channel's collectives
  /// in flight (in_flight_clock.hpp; per step the max over ranks, then the median over steps;
  /// NaN where the backend does not observe completion on the host, as on CUDA).
  double message_bytes = 0;
  int group_size = 0;
  double in_flight_ms = std::numeric_limits<double>::quiet_NaN();
  /// S / in-flight time and that times the bus factor, GB/s (NaN when not measured or idle).
  double algbw_gbps() const;
  double busbw_gbps(comm::CollectiveKind kind) const;
};

/// The memory terms a backend measures, in the order and with the names of the projection's
/// model (project/memory_model.hpp; activations aside: the host runs the activation work for
/// its cost and keeps nothing for backward).
enum class MemoryTerm {
  masters,
  optimizer_state,
  gradients,
  ns_input,
  weights,
  grad_buffers,
  gather_buffers,
  ns_workspace,
  tp_buffers,
};
inline constexpr std::size_t kMemoryTermCount = 9;
const char* memory_term_name(MemoryTerm t);

/// A backend's own peak of the buffers the memory model counts (exec/memory_tracker.hpp),
/// max over ranks; docs/MEMORY.md "Measured". `measured` is false where the backend keeps no
/// account (CUDA).
struct MeasuredMemory {
  bool measured = false;
  std::int64_t peak_bytes = 0;  ///< the largest live total over every step, max over ranks
  int rank = 0;                 ///< the rank it occurs on (the lowest of equals)
  std::string phase;            ///< forward, backward or optimizer
  std::array<std::int64_t, kMemoryTermCount> terms_at_peak{};  ///< that rank, that moment
  /// Not in the peak, max over ranks: what the backend allocated for the counted terms (its
  /// pools sized by the largest slot, one Newton–Schulz workspace per shape) and what it
  /// allocates that the model leaves out (fp32 images of a 16-bit wire, conversion scratch,
  /// the synthetic compute's inputs and outputs, the activation work's scratch).
  std::int64_t reserved_bytes = 0;
  std::int64_t uncounted_bytes = 0;
};

struct RunResult {
  Method method = Method::dmuon;
  std::string reshard;
  int world_size = 1;
  int replicate = 1;
  std::int64_t hook_sites = 0;
  std::int64_t hook_calls_per_step = 0;  ///< hooks that fire per rank per step (4 per site)
  std::int64_t hook_calls_formula = 0;
  std::int64_t hook_comm_calls_per_step = 0;  ///< of those, hooks that communicate (Z3 3, Z2 2)
  std::int64_t hook_comm_calls_formula = 0;
  std::array<KindResult, kChannelCount> kinds{};  ///< by channel_index()
  bool audit_ok = true;
  std::string audit_message;  ///< first mismatch (rank, step, kind) if any
  /// RunControl::trace: this rank's timeline (Trace::spans_json), every step incl. warm-up.
  std::string trace_spans;
  std::array<double, kPhaseCount>
      phases_ms{};  ///< median over measured steps of the max over ranks
  // Peak bytes per rank (max over ranks). Packed/gathered buffers are counted as a real
  // implementation holds them live (Z3: one group at a time; Z2: all groups).
  std::int64_t peak_packed_bytes = 0;
  std::int64_t master_bytes = 0;
  std::int64_t momentum_bytes = 0;
  MeasuredMemory memory_measured;
  bool checked = false;
  bool check_passed = true;
  double max_rel_error = 0;
  double check_tolerance = 0;  ///< the bound max_rel_error was held to
  /// Why a 16-bit check may fail although nothing is wrong (empty when it cannot).
  std::string check_note;
  std::string worst_param;
  /// Rank 0 only: per measured step, rank and phase, ms: [(step * world + rank) * kPhaseCount +
  /// phase] (the values the medians above reduce).
  std::vector<double> rank_phases_ms;
  /// Rank 0 only: per channel and rank, [channel * world + rank], of the last step: collective
  /// calls, measured bytes and formula bytes.
  std::vector<std::int64_t> rank_calls, rank_bytes, rank_formula_bytes;
  /// Rank 0 only, with --check or EngineOptions::keep_final_weights: every parameter's final
  /// weights, in tree.parameter_order().
  std::vector<std::vector<float>> final_weights;
  /// Tensor parallelism: T (world_size = R x G x T; the TP exchange is the tp channels; the
  /// global batch is o.global_samples(world_size / T)).
  int tp = 1;
  /// --pp P: the result is stage `pipeline_stage`'s (its world of world_size ranks; the
  /// stage boundary's sends and receives are the pipeline_send_recv channel).
  int pipeline_stages = 1;
  int pipeline_stage = 0;

  std::int64_t bytes_measured_total() const;
  std::int64_t bytes_formula_total() const;
};

}  // namespace dmuon::engine
