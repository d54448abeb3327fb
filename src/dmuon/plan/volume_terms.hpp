#pragma once
// The audit's closed-form volume, one term per route (the nccl-tests "table per collective"
// idea): from the plan alone, never from the schedule, each term says on which (group, kind) a
// route's parameters travel and what every rank moves there in ONE PASS. The rules that cut
// across routes (Z3 moves the weights twice, --accum K repeats every weight pass, the hooks,
// --clip-norm's all-reduce) are applied once, by engine/step/step_volume.hpp, the only entry
// point (predict_step_volume).
//
// Counter convention (comm/collective_counters.hpp): broadcast, all_gather and scatter count
// the bytes a rank receives; reduce, reduce_scatter, all_reduce and gather the bytes it sends.
// e is the bytes per element a parameter's weights travel in and e_g its gradients
// (element_bytes of the wire and of the reduce type: --comm-dtype, --reduce-dtype, or its
// --route dtype for both), G × R the DP world (a row is the shard group of G ranks, a column
// the replicate group of R), per rank per pass:
//   owner_rows   dmuon's owner-based parameters (hook sites, partition owners; P_M their bytes,
//                col_s what column s owns, own_r what rank r owns, pairs the packed
//                (site, owner[, --route type]) buffers, D the parameters; P_M^g, col_s^g,
//                own_r^g the same sums in gradient bytes e_g):
//                  shard broadcast      weight pass  pairs                 P_M − col_s
//                  shard reduce         once         D (per-param) | pairs P_M^g − col_s^g
//                  HSDP (R > 1): replicate reduce (stage 2), once, D_s | pairs_s,
//                  col_s^g − own_r^g;
//                  replicate broadcast of the fp32 master, once, pairs_s, 4·(M_s − m_r)
//   owner_world  ddp-dmuon's owner-based parameters over all N = R·G ranks as one group:
//                  shard reduce         once         D | pairs             P_M^g − own_r^g
//                  shard broadcast      once         pairs                 4·(M − m_r) (fp32)
//   sharded      FSDP, and dmuon's --route fsdp / sharded_adamw: per parameter of n elements,
//                c = ceil(n / G) per rank:
//                  shard all_gather     weight pass  1                     e·(G−1)·c
//                                       (FSDP2's root unit: forward pass)
//                  shard reduce_scatter once         1                     e_g·(G−1)·c
//                  HSDP replicate all_reduce, once, 1, e_g·⌊c·(R−1)/R⌋
//   fsdp-muon    the optimizer's all_gather of each Muon parameter's Nesterov input: shard
//                all_gather, once, 1, e·(G−1)·c
//   ddp          shard (all N ranks) all_reduce, once, 1, e_g·⌊n·(N−1)/N⌋
//   tp           the TP exchange (tp_volume.hpp), per world rank (its gather in e: the
//                Nesterov inputs travel in the weights' type, as fsdp-muon's gather does)
//   clip         world all_reduce of one fp32, once, 1, ⌊(N−1)/N⌋·4 = 0
//   expert       --ep E < G: the routed experts over their expert group of n = G/E ranks
//                (member j = column div E), by the method's way with the dense parameters:
//                  owner-based (Plan::expert_owner; own_j^(g) what slot j owns, pairs the
//                  (container, slot[, --route type]) buffers):
//                    expert broadcast   weight pass (ddp-dmuon: once, the fp32 master 4·n)
//                                       pairs   P_X − own_j
//                    expert reduce      once    D | pairs   P_X^g − own_j^g
//                  sharded (c = ceil(n_p / n)): expert all_gather e·(n−1)·c per weight pass,
//                  expert reduce_scatter e_g·(n−1)·c once; fsdp-muon: + an all_gather of the
//                  Muon ones' Nesterov inputs once; DDP: expert all_reduce e_g·⌊n_p·(n−1)/n⌋
// Sums and products are checked: a volume beyond int64 is an InputError naming the parameter.

#include <cstdint>
#include <vector>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/plan/tp_volume.hpp"

namespace dmuon::plan {

enum class VolumeRoute { owner_rows, owner_world, sharded, sharded_adamw, ddp, tp, clip, expert };
const char* volume_route_name(VolumeRoute r);

/// How often a row's pass happens per step.
enum class Repeat {
  weight_pass,  ///< moves weights: Z3 twice per micro-step (forward, backward), Z2 once; × K
  /// moves weights once per micro-step even in Z3: FSDP2's root unit, gathered before its
  /// forward and kept through its backward (engine/step/step_volume.hpp); × K
  forward_pass,
  once,  ///< gradients after the last micro-step, or the optimizer step: once per step
};

/// One (group, kind) of a route. `volume` holds one entry (the same on every rank) or one per
/// DP rank (per world rank on the TP group).
struct VolumeRow {
  VolumeRoute route;
  CommGroup group;
  comm::CollectiveKind kind;
  Repeat repeat;
  KindVolume volume;
  std::int64_t calls(int index) const { return at(volume.calls_per_rank, index); }
  std::int64_t bytes(int index) const { return at(volume.bytes_per_rank, index); }

 private:
  static std::int64_t at(const std::vector<std::int64_t>& v, int index) {
    return v.size() == 1 ? v.front() : v.at(static_cast<std::size_t>(index));
  }
};

/// What every term reads besides its parameters.
struct TermContext {
  const model::ModuleTree& tree;
  const Plan& plan;
  GradReduce grad_reduce = GradReduce::per_param;
  int wire_bytes = 0;    ///< the run's --comm-dtype bytes per element; 0: each parameter's dtype
  int reduce_bytes = 0;  ///< the run's --reduce-dtype bytes per element (gradients); 0: idem
  bool tp = true;        ///< the plan's TP: local shard sizes and the TP exchange
};

/// Bytes per element parameter `pid` travels in: its --route dtype, else `wire_bytes` when > 0,
/// else its own dtype.
int element_bytes(const model::ModuleTree& tree, const Plan& plan, int pid, int wire_bytes);

/// Elements per rank of a parameter sharded over G ranks (shards padded to G·c).
inline std::int64_t shard_chunk(std::int64_t numel, int shard) {
  return (numel + shard - 1) / shard;
}

/// The owner-based terms over the plan's hook sites; `facts` gets the dedicated bytes, what
/// each rank owns and the largest parameter (its kinds are left to the caller).
std::vector<VolumeRow> owner_rows_term(const TermContext& c, CommVolume& facts);
std::vector<VolumeRow> owner_world_term(const TermContext& c, CommVolume& facts);
/// FSDP's (and dmuon's sharded routes') rows over `pids`, labelled `route`; `gathers`: how
/// often its all_gather repeats (forward_pass: FSDP2's root unit).
std::vector<VolumeRow> sharded_term(const TermContext& c, const std::vector<int>& pids,
                                    VolumeRoute route, Repeat gathers = Repeat::weight_pass);
/// fsdp-muon's optimizer all_gather over `pids` (the dedicated Muon parameters).
VolumeRow optimizer_gather_term(const TermContext& c, const std::vector<int>& pids);
VolumeRow ddp_term(const TermContext& c, const std::vector<int>& pids);
/// The TP exchange per world rank; `facts` gets the other direction of both kinds.
std::vector<VolumeRow> tp_term(const TermContext& c, TpCommVolume& facts);
VolumeRow clip_term(int world);

/// How a method moves the routed experts it shares over an expert group (--ep E < G).
struct ExpertWays {
  bool owners = false;            ///< owner-based routes have owners (dmuon, ddp-dmuon)
  bool replicas = false;          ///< DDP: whole replicas, gradients all-reduced
  bool optimizer_gather = false;  ///< fsdp-muon: the Muon ones' Nesterov inputs gathered
};
/// The expert term (empty unless E < G); `sites` gets the expert groups that are owner-based
/// DMuon sites (hooked as the plan's sites: dmuon).
std::vector<VolumeRow> expert_term(const TermContext& c, const ExpertWays& ways,
                                   std::int64_t& sites);

}  // namespace dmuon::plan
