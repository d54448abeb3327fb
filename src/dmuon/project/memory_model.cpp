#include "dmuon/project/memory_model.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::project {

using engine::Storage;

namespace {

std::int64_t bytes_of(kernels::Dtype t) {
  return static_cast<std::int64_t>(kernels::dtype_bytes(t));
}

// Every memory term is a few bytes per element of the layout's parameters and arenas (at
// most 4 B × 9 for a Newton–Schulz workspace of 4·r·c + 5·min(r, c)² fp32 values), summed over
// a dozen terms: sizes within 2^63 / 128 element-units keep every product and sum in int64.
constexpr long double kMaxUnits = 9223372036854775807.0L / 128;

// The backstop of require_memory_representable for a layout (reduced layouts keep no names).
void require_representable(const engine::StepLayout& L) {
  long double units = static_cast<long double>(L.master_elems) + L.state_elems +
                      L.second_state_elems + L.gather_pool_elems + L.alt_gather_elems +
                      L.live_weight_bytes;
  for (const auto& p : L.params) {
    const auto& s = p.tp_sharded() ? p.logical : p.shape;
    units += static_cast<long double>(p.numel) + p.padded +
             static_cast<long double>(s.rows) * static_cast<long double>(s.cols);
  }
  if (units > kMaxUnits)
    throw InputError(fmt::format(
        "the memory of rank {} overflows 64 bits (limit: 2^63-1 bytes per rank)", L.me.rank));
}

std::int64_t rounded(double bytes) {
  return static_cast<std::int64_t>(std::llround(bytes));
}

// The gradients travelling when backward's pooled buffers (gathered weights and travelling
// gradients together) peak, as the schedule holds them (step_schedule.hpp): backward takes the
// groups in reverse forward order; at position k the weights of order[k..k+prefetch] are live
// (Z3; Z2: every group whose backward has not run, each freed after its backward), and the
// gradient ring of grad_window slots keeps each slot's last occupant until the group that
// reuses the slot (position k, slot k mod grad_window, when it has pooled gradients) waits
// for its reduce just before writing. `weights` is the forward's live weights; the result is
// the joint peak less them (never negative: the position where the largest weight window is
// live holds at least those weights). Z3 with FSDP2's root unit kept gathered
// (StepLayout::stays_gathered): its weights are live through backward until its own backward.
// Taking the two maxima apart would add a weight window and a gradient window that are never live
// together. With FSDP2 (L.fsdp2) an FSDP group's pooled gradients are autograd's, each in its
// parameter's weight type, while it computes, beside the one FSDP reduce input in flight (kept
// apart from the ring: FSDP2 allocates it); then its weights are released (FSDP2 reshards first),
// that input is waited and freed, and the group's own is written (the copy-in: both of its copies
// live). O(groups) per rank.
std::int64_t travelling_gradients(const engine::StepLayout& L, std::int64_t weights) {
  const std::int64_t wire = bytes_of(L.wire);
  const std::int64_t alt = bytes_of(L.alt_wire);
  const std::int64_t reduce = bytes_of(L.reduce);  // the grad ring's type
  const auto n = static_cast<std::int64_t>(L.groups.size());
  const bool all_kept = L.reshard == plan::Reshard::z2;
  const std::int64_t ahead = std::max(0, L.weight_window - 1);
  const auto slots = static_cast<std::size_t>(std::max(1, L.grad_window));
  // The group at backward position k.
  const auto at = [&](std::int64_t k) -> const engine::GroupLayout& {
    return L.groups[static_cast<std::size_t>(n - 1 - k)];
  };
  const auto weight_bytes = [&](std::int64_t k) {
    const auto& g = at(k);
    return is_ddp(L.method) ? 0 : g.weight_elems * wire + g.alt_weight_elems * alt;
  };
  // Autograd's full gradients of the members whose gradients pool (sharded, the run's reduce
  // type: a --route dtype member's are in the persistent alt arena), in each one's own type.
  const auto autograd_bytes = [&](const engine::GroupLayout& G) {
    std::int64_t b = 0;
    for (int pi : G.members) {
      const auto& p = L.params[static_cast<std::size_t>(pi)];
      if (p.sharded() && !p.alt_grad) b += p.numel * bytes_of(p.wire);
    }
    return b;
  };
  // Z3: a group that stays gathered (FSDP2's root unit) is live from the start of backward,
  // not from its prefetch; it is released after its own backward like the others.
  const auto kept = [&](std::int64_t k) { return L.stays_gathered(at(k)); };
  std::int64_t live_w = 0;  // Z3: positions [k, k + ahead] and the kept ones; Z2: [k, n)
  for (std::int64_t k = 0; k < n; ++k)
    if (all_kept || k < ahead || kept(k)) live_w += weight_bytes(k);
  std::vector<std::int64_t> ring(slots, 0);  // each slot's occupant's pooled gradient bytes
  std::int64_t in_ring = 0, fsdp2_input = 0, joint = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    if (!all_kept && k + ahead < n && !kept(k + ahead)) live_w += weight_bytes(k + ahead);
    joint = std::max(joint, live_w + in_ring + fsdp2_input);  // before the oldest is waited
    const auto& G = at(k);
    const std::int64_t g = reduce * G.grad_elems;
    // The reduce that last used k's slot is waited before k computes (step_schedule.cpp).
    if (g > 0) in_ring -= std::exchange(ring[static_cast<std::size_t>(k) % slots], 0);
    if (L.fsdp2_reduces(G)) {
      const std::int64_t autograd = autograd_bytes(G);
      joint = std::max(joint, live_w + in_ring + fsdp2_input + autograd);
      live_w -= weight_bytes(k);  // resharded before the reduce (release_weights)
      fsdp2_input = g;            // the previous input freed, this group's written
      joint = std::max(joint, live_w + in_ring + fsdp2_input + autograd);  // the copy-in
      continue;
    }
    if (g > 0) {
      ring[static_cast<std::size_t>(k) % slots] = g;
      in_ring += g;
    }
    joint = std::max(joint, live_w + in_ring + fsdp2_input);  // k's gradients written
    live_w -= weight_bytes(k);
  }
  return std::max<std::int64_t>(0, joint - weights);
}

// The reference's optimizer memory (memory_model.hpp) replacing the engine's: Muon momentum in
// L.momentum, no persistent Nesterov input, the Gram Newton–Schulz workspace in the CUDA-graph
// pool, per-shape graph buffers, the transient Nesterov input and reduced-gradient clones.
void hold_as_the_reference(const engine::StepLayout& L, RankMemory& m) {
  const std::int64_t g = bytes_of(L.reduce);
  std::int64_t momentum = 0, largest = 0, workspace = 0;
  std::set<std::pair<std::int64_t, std::int64_t>> shapes;
  for (const auto& p : L.params) {
    if (!p.muon || !p.updated_here) continue;
    momentum += p.state_elems;
    if (p.tp_sharded() && p.tp_owner != L.tp_rank()) continue;
    const auto& s = p.tp_sharded() ? p.logical : p.shape;
    const std::int64_t rc = s.rows * s.cols, mm = std::min(s.rows, s.cols);
    largest = std::max(largest, rc);
    workspace = std::max(workspace, std::max(8 * rc, 4 * rc + 12 * mm * mm));
    shapes.emplace(s.rows, s.cols);  // a graph per input shape: [r, c] and [c, r] apart
  }
  m.optimizer_state -= (bytes_of(L.param) - bytes_of(L.momentum)) * momentum;
  m.ns_input = 0;
  m.ns_workspace = workspace;
  m.graph_pool = true;
  for (const auto& [a, b] : shapes) m.graph_buffers += 2 * g * a * b;
  // The owned reduced gradients per site in forward order, cloned one group ahead.
  std::vector<std::int64_t> owned(L.groups.size(), 0);
  for (const auto& pr : L.pairs)
    if (pr.owned) owned[static_cast<std::size_t>(pr.group)] += pr.numel;
  std::int64_t clones = 0, all = 0;
  for (std::size_t k = 0; k < owned.size(); ++k) {
    all += owned[k];
    clones = std::max(clones, owned[k] + (k + 1 < owned.size() ? owned[k + 1] : 0));
  }
  m.optimizer_transient = g * (largest + (L.coalesced_clip ? all : clones));
}

}  // namespace

const char* memory_phase_name(MemoryPhase p) {
  switch (p) {
    case MemoryPhase::forward: return "forward";
    case MemoryPhase::backward: return "backward";
    case MemoryPhase::optimizer: return "optimizer";
  }
  return "?";
}

std::int64_t RankMemory::phase_bytes(MemoryPhase p) const {
  switch (p) {
    case MemoryPhase::forward: return persistent() + weights + activations;
    case MemoryPhase::backward:
      return persistent() + weights + activations + recompute + grad_buffers;
    case MemoryPhase::optimizer:
      return persistent() + gather_buffers + (graph_pool ? 0 : ns_workspace) + optimizer_transient;
  }
  return 0;
}

MemoryPhase RankMemory::peak_phase() const {
  MemoryPhase best = MemoryPhase::forward;
  for (auto p : {MemoryPhase::backward, MemoryPhase::optimizer})
    if (phase_bytes(p) > phase_bytes(best)) best = p;
  return best;
}

std::vector<std::pair<std::string, std::int64_t>> RankMemory::terms() const {
  return {{"masters", masters},
          {"optimizer_state", optimizer_state},
          {"gradients", gradients},
          {"ns_input", ns_input},
          {"weights", weights},
          {"grad_buffers", grad_buffers},
          {"gather_buffers", gather_buffers},
          {"ns_workspace", ns_workspace},
          {"tp_buffers", tp_buffers},
          {"activations", activations},
          {"recompute", recompute},
          {"graph_buffers", graph_buffers},
          {"optimizer_transient", optimizer_transient}};
}

RankMemory memory_of(const engine::StepLayout& L) {
  require_representable(L);
  RankMemory m;
  m.rank = L.me.rank;
  const std::int64_t wire = bytes_of(L.wire);
  const std::int64_t alt = bytes_of(L.alt_wire);
  const std::int64_t reduce = bytes_of(L.reduce);  // gradients (--reduce-dtype)
  const std::int64_t kept = bytes_of(L.param);     // --param-dtype
  m.masters = kept * L.master_elems;
  m.optimizer_state = kept * (L.state_elems + L.second_state_elems);
  // Persistent gradients, from the pairs and parameters (a reduced layout keeps no arena
  // totals): as make_layout lays them out.
  for (const auto& pr : L.pairs) {
    if (pr.alt_grad)
      m.gradients += pr.numel * bytes_of(pr.grad_wire);  // its own region, rooted or not
    else if (pr.rooted_here)
      m.gradients += pr.numel * reduce;
  }
  std::int64_t largest_ns = 0, tp_chunk = 0;
  bool tp_root = false;
  for (const auto& p : L.params) {
    if (p.pair < 0 && p.pid >= 0) {
      // A narrower --param-dtype: autograd's gradient (and FSDP2's reduced shard, cast back to
      // the parameter's type) is kept in it.
      const std::int64_t b = std::min(bytes_of(p.grad_wire), kept);
      if (p.sharded()) {
        const bool deferred = L.groups[static_cast<std::size_t>(p.group)].deferred_reduce;
        m.gradients += b * (p.chunk + (p.alt_grad || deferred ? p.padded : 0));
      } else if (p.storage == Storage::replicated || p.storage == Storage::expert) {
        m.gradients += b * p.numel;
      }
    }
    if (!p.muon || !p.updated_here) continue;
    m.ns_input += 4 * p.state_elems;
    if (p.tp_sharded()) {  // as make_layout sizes the TP exchange (a reduced layout keeps
                           // the reference rank's sizes)
      tp_chunk = std::max(tp_chunk, p.numel);
      tp_root = tp_root || p.tp_owner == L.tp_rank();
    }
    // Newton–Schulz runs on the full matrix (sharded: the gathered one), or for a TP-sharded
    // parameter on the logical matrix at its TP owner only.
    if (p.tp_sharded() && p.tp_owner != L.tp_rank()) continue;
    const auto& s = p.tp_sharded() ? p.logical : p.shape;
    const std::int64_t mm = std::min(s.rows, s.cols);
    largest_ns = std::max(largest_ns, 4 * s.rows * s.cols + 5 * mm * mm);
  }
  m.ns_workspace = 4 * largest_ns;
  if (L.reference_memory) hold_as_the_reference(L, m);
  m.weights = L.live_weight_bytes;
  m.grad_buffers = travelling_gradients(L, m.weights);
  m.gather_buffers = wire * L.gather_pool_elems + alt * L.alt_gather_elems;
  // StepLayout::tp_send_elems / tp_recv_elems / tp_matrix_elems of this rank.
  const std::int64_t T = L.tp();
  m.tp_buffers =
      wire * (tp_chunk + (tp_root ? T * tp_chunk : 0)) + 4 * (tp_root ? 2 * T * tp_chunk : 0);
  return m;
}

void require_memory_representable(const model::ModuleTree& tree) {
  long double units = 0;
  int largest = -1;
  for (int pid = 0; pid < static_cast<int>(tree.num_parameters()); ++pid) {
    const auto n = tree.parameter(pid).numel();
    units += 2.0L * static_cast<long double>(n);  // the parameter, and its matrix view
    if (largest < 0 || n > tree.parameter(largest).numel()) largest = pid;
  }
  if (units <= kMaxUnits) return;
  throw InputError(fmt::format(
      "the model's memory per rank overflows 64 bits (limit: 2^63-1 bytes per rank; the "
      "largest parameter is '{}', {} elements)",
      abbreviate_value(tree.parameter(largest).name), tree.parameter(largest).numel()));
}

RankMemory with_activations(RankMemory m, const ActivationMemory& a) {
  m.activations = a.saved;
  m.recompute = a.backward_extra(m.grad_buffers);
  return m;
}

std::int64_t excess_bytes(const RankMemory& m, double memory_gb) {
  if (memory_gb <= 0) return 0;
  return std::max<std::int64_t>(0, m.peak() - rounded(memory_gb * 1e9));
}

void MemoryCandidates::add(const RankMemory& m) {
  if (!any) {
    backward = optimizer = m;
    any = true;
    return;
  }
  if (m.phase_bytes(MemoryPhase::backward) > backward.phase_bytes(MemoryPhase::backward))
    backward = m;
  if (m.phase_bytes(MemoryPhase::optimizer) > optimizer.phase_bytes(MemoryPhase::optimizer))
    optimizer = m;
}

RankMemory MemoryCandidates::peak(const ActivationMemory& a) const {
  const RankMemory b = with_activations(backward, a);
  const RankMemory o = with_activations(optimizer, a);
  return o.peak() > b.peak() ? o : b;
}

}  // namespace dmuon::project
