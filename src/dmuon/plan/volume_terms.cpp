#include "dmuon/plan/volume_terms.hpp"

#include <fmt/format.h>

#include <set>
#include <tuple>
#include <utility>

#include "dmuon/base/checked_int.hpp"
#include "dmuon/model/expert_local_tree.hpp"

namespace dmuon::plan {
namespace {

using comm::CollectiveKind;

VolumeRow make_row(VolumeRoute route, CommGroup group, CollectiveKind kind, Repeat repeat,
                   int ranks = 1) {
  VolumeRow row{route, group, kind, repeat, {}};
  row.volume.calls_per_rank.assign(static_cast<std::size_t>(ranks), 0);
  row.volume.bytes_per_rank.assign(static_cast<std::size_t>(ranks), 0);
  return row;
}

void set(VolumeRow& row, int rank, std::int64_t calls, std::int64_t bytes) {
  row.volume.calls_per_rank.at(static_cast<std::size_t>(rank)) = calls;
  row.volume.bytes_per_rank.at(static_cast<std::size_t>(rank)) = bytes;
}

// Adds calls and bytes to a row the same on every rank.
template <class What>
void add(VolumeRow& row, std::int64_t calls, std::int64_t bytes, What&& overflow) {
  row.volume.calls_per_rank.front() += calls;
  row.volume.bytes_per_rank.front() =
      checked_add(row.volume.bytes_per_rank.front(), bytes, overflow);
}

// The elements a rank holds of parameter `pid`: its TP shard when the plan is tensor-parallel.
std::int64_t numel_of(const TermContext& c, int pid) {
  if (c.tp && c.plan.tp.tp > 1) return c.plan.tp.local_numel.at(static_cast<std::size_t>(pid));
  return c.tree.parameter(pid).numel();
}

// The error of a volume sum that overflows at parameter `pid` (formatted only then); `what`
// names the sum ("sharded", "TP", or nothing).
auto overflow_at(const TermContext& c, int pid, const char* what = "") {
  return [&c, pid, what] {
    return fmt::format("predicted {}{}volume overflows 64 bits at parameter '{}'", what,
                       *what ? " " : "", c.tree.parameter(pid).name);
  };
}

const std::vector<int>* route_types(const Plan& plan) {
  return plan.route_wire_bytes.empty() ? nullptr : &plan.route_wire_bytes;
}

// The owner-based parameters summed by owner: each rank's volume is "all minus what its column
// (or itself) owns", so an owner term is O(parameters + ranks), not O(parameters x ranks).
struct OwnerSums {
  std::int64_t pairs = 0, params = 0;  // packed (site, owner, type) buffers; parameters
  std::int64_t bytes = 0, grad_bytes = 0, master = 0;  // weights, gradients; the fp32 master
  std::vector<std::int64_t> col_pairs, col_params, col_bytes, col_grad_bytes,
      col_master;                                                      // by owner column
  std::vector<std::int64_t> rank_bytes, rank_grad_bytes, rank_master;  // by owner DP rank
};

OwnerSums sum_owners(const TermContext& c, CommVolume& facts) {
  const auto& part = c.plan.partition;
  const RankGrid dp_grid{part.options.replicate, part.options.shard, 1};
  const auto G = static_cast<std::size_t>(dp_grid.shard),
             world = static_cast<std::size_t>(dp_grid.world());
  OwnerSums s;
  for (auto* v : {&s.col_pairs, &s.col_params, &s.col_bytes, &s.col_grad_bytes, &s.col_master})
    v->assign(G, 0);
  for (auto* v : {&s.rank_bytes, &s.rank_grad_bytes, &s.rank_master}) v->assign(world, 0);
  for (const auto& site : c.plan.hooks.sites) {
    std::set<std::pair<int, int>> buffers;  // (owner rank, type key): the site's packed buffers
    for (int pid : site.params) {
      const auto& prm = c.tree.parameter(pid);
      const auto overflow = [&] {
        return fmt::format("predicted volume overflows 64 bits at dedicated parameter '{}'",
                           prm.name);
      };
      const std::int64_t n = numel_of(c, pid);
      const std::int64_t bytes =
          checked_mul(element_bytes(c.tree, c.plan, pid, c.wire_bytes), n, overflow);
      const std::int64_t grad_bytes =
          checked_mul(element_bytes(c.tree, c.plan, pid, c.reduce_bytes), n, overflow);
      const std::int64_t master = checked_mul(4, n, overflow);
      facts.note_param(prm.name, bytes);
      const int owner = part.owner_rank(pid);
      const auto col = static_cast<std::size_t>(dp_grid.column(owner));
      buffers.insert(
          {owner, packed_type_key(route_types(c.plan), pid, c.wire_bytes, c.reduce_bytes)});
      ++s.params;
      ++s.col_params[col];
      s.bytes = checked_add(s.bytes, bytes, overflow);
      s.grad_bytes = checked_add(s.grad_bytes, grad_bytes, overflow);
      s.master = checked_add(s.master, master, overflow);
      // Column and rank sums are parts of the checked totals.
      s.col_bytes[col] += bytes;
      s.col_grad_bytes[col] += grad_bytes;
      s.col_master[col] += master;
      s.rank_bytes[static_cast<std::size_t>(owner)] += bytes;
      s.rank_grad_bytes[static_cast<std::size_t>(owner)] += grad_bytes;
      s.rank_master[static_cast<std::size_t>(owner)] += master;
    }
    for (const auto& b : buffers) {
      ++s.pairs;
      ++s.col_pairs[static_cast<std::size_t>(dp_grid.column(b.first))];
    }
  }
  facts.dedicated_bytes = s.bytes;
  facts.owned_bytes = s.rank_bytes;
  return s;
}

}  // namespace

const char* volume_route_name(VolumeRoute r) {
  switch (r) {
    case VolumeRoute::owner_rows: return "owner_rows";
    case VolumeRoute::owner_world: return "owner_world";
    case VolumeRoute::sharded: return "sharded";
    case VolumeRoute::sharded_adamw: return "sharded_adamw";
    case VolumeRoute::ddp: return "ddp";
    case VolumeRoute::tp: return "tp";
    case VolumeRoute::clip: return "clip";
    case VolumeRoute::expert: return "expert";
  }
  return "?";
}

int element_bytes(const model::ModuleTree& tree, const Plan& plan, int pid, int wire_bytes) {
  const int b = plan.wire_bytes(pid, wire_bytes);
  return b > 0 ? b : model::dtype_size(tree.parameter(pid).dtype);
}

std::vector<VolumeRow> owner_rows_term(const TermContext& c, CommVolume& facts) {
  const auto& po = c.plan.partition.options;
  const int G = po.shard, world = G * po.replicate;
  const OwnerSums s = sum_owners(c, facts);
  const bool packed = c.grad_reduce == GradReduce::packed;
  constexpr auto row = CommGroup::shard, column = CommGroup::replicate;
  constexpr auto route = VolumeRoute::owner_rows;
  auto broadcast = make_row(route, row, CollectiveKind::broadcast, Repeat::weight_pass, world);
  auto reduce = make_row(route, row, CollectiveKind::reduce, Repeat::once, world);
  auto stage2 = make_row(route, column, CollectiveKind::reduce, Repeat::once, world);
  auto replicate = make_row(route, column, CollectiveKind::broadcast, Repeat::once, world);
  for (int d = 0; d < world; ++d) {
    const auto col = static_cast<std::size_t>(d % G);
    const auto r = static_cast<std::size_t>(d);
    // In the row: from (to) every owner outside this rank's column.
    set(broadcast, d, s.pairs, s.bytes - s.col_bytes[col]);
    set(reduce, d, packed ? s.pairs : s.params, s.grad_bytes - s.col_grad_bytes[col]);
    // HSDP: stage 2 inside the owner's column to the owner; the updated master back out.
    set(stage2, d, packed ? s.col_pairs[col] : s.col_params[col],
        s.col_grad_bytes[col] - s.rank_grad_bytes[r]);
    set(replicate, d, s.col_pairs[col], s.col_master[col] - s.rank_master[r]);
  }
  if (po.replicate == 1) return {broadcast, reduce};
  return {broadcast, reduce, stage2, replicate};
}

std::vector<VolumeRow> owner_world_term(const TermContext& c, CommVolume& facts) {
  const auto& po = c.plan.partition.options;
  const int world = po.shard * po.replicate;
  const OwnerSums s = sum_owners(c, facts);
  const bool packed = c.grad_reduce == GradReduce::packed;
  constexpr auto route = VolumeRoute::owner_world;
  auto reduce = make_row(route, CommGroup::shard, CollectiveKind::reduce, Repeat::once, world);
  auto broadcast =
      make_row(route, CommGroup::shard, CollectiveKind::broadcast, Repeat::once, world);
  for (int d = 0; d < world; ++d) {
    const auto r = static_cast<std::size_t>(d);
    set(reduce, d, packed ? s.pairs : s.params, s.grad_bytes - s.rank_grad_bytes[r]);
    set(broadcast, d, s.pairs, s.master - s.rank_master[r]);
  }
  return {reduce, broadcast};
}

std::vector<VolumeRow> sharded_term(const TermContext& c, const std::vector<int>& pids,
                                    VolumeRoute route, Repeat gathers) {
  const std::int64_t G = c.plan.partition.options.shard, R = c.plan.partition.options.replicate;
  auto gather = make_row(route, CommGroup::shard, CollectiveKind::all_gather, gathers);
  auto scatter = make_row(route, CommGroup::shard, CollectiveKind::reduce_scatter, Repeat::once);
  auto replicas = make_row(route, CommGroup::replicate, CollectiveKind::all_reduce, Repeat::once);
  for (int pid : pids) {
    const auto overflow = overflow_at(c, pid, volume_route_name(route));
    const std::int64_t chunk = shard_chunk(numel_of(c, pid), static_cast<int>(G));
    const std::int64_t e = element_bytes(c.tree, c.plan, pid, c.wire_bytes);
    const std::int64_t eg = element_bytes(c.tree, c.plan, pid, c.reduce_bytes);
    const std::int64_t rest = checked_mul(G - 1, chunk, overflow);
    add(gather, 1, checked_mul(e, rest, overflow), overflow);
    add(scatter, 1, checked_mul(eg, rest, overflow), overflow);
    if (R > 1)
      add(replicas, 1, checked_mul(eg, checked_mul(chunk, R - 1, overflow) / R, overflow),
          overflow);
  }
  if (R == 1) return {gather, scatter};
  return {gather, scatter, replicas};
}

VolumeRow optimizer_gather_term(const TermContext& c, const std::vector<int>& pids) {
  const std::int64_t G = c.plan.partition.options.shard;
  auto gather =
      make_row(VolumeRoute::sharded, CommGroup::shard, CollectiveKind::all_gather, Repeat::once);
  for (int pid : pids) {
    const auto overflow = overflow_at(c, pid);
    const std::int64_t chunk = shard_chunk(numel_of(c, pid), static_cast<int>(G));
    const std::int64_t e = element_bytes(c.tree, c.plan, pid, c.wire_bytes);
    add(gather, 1, checked_mul(e, checked_mul(G - 1, chunk, overflow), overflow), overflow);
  }
  return gather;
}

VolumeRow ddp_term(const TermContext& c, const std::vector<int>& pids) {
  const std::int64_t N = static_cast<std::int64_t>(c.plan.partition.options.shard) *
                         c.plan.partition.options.replicate;
  auto all_reduce =
      make_row(VolumeRoute::ddp, CommGroup::shard, CollectiveKind::all_reduce, Repeat::once);
  for (int pid : pids) {
    const auto overflow = overflow_at(c, pid);
    const std::int64_t e = element_bytes(c.tree, c.plan, pid, c.reduce_bytes);  // gradients
    add(all_reduce, 1, checked_mul(e, checked_mul(numel_of(c, pid), N - 1, overflow) / N, overflow),
        overflow);
  }
  return all_reduce;
}

std::vector<VolumeRow> tp_term(const TermContext& c, TpCommVolume& facts) {
  const auto& tpp = c.plan.tp;
  const RankGrid grid = c.plan.grid();
  const int T = grid.tp, world = grid.world();
  auto gather =
      make_row(VolumeRoute::tp, CommGroup::tp, CollectiveKind::gather, Repeat::once, world);
  auto scatter =
      make_row(VolumeRoute::tp, CommGroup::tp, CollectiveKind::scatter, Repeat::once, world);
  facts.gather_received.assign(static_cast<std::size_t>(world), 0);
  facts.scatter_sent.assign(static_cast<std::size_t>(world), 0);
  for (int pid : tpp.sharded) {
    const auto overflow = overflow_at(c, pid, "TP");
    const std::int64_t local = tpp.local_numel.at(static_cast<std::size_t>(pid));
    const std::int64_t grad_chunk =
        checked_mul(element_bytes(c.tree, c.plan, pid, c.wire_bytes), local, overflow);
    const std::int64_t update_chunk = checked_mul(4, local, overflow);  // fp32 updates
    const int d = c.plan.partition.owner_rank(pid);
    const int owner = tpp.tp_owner.at(static_cast<std::size_t>(pid));
    for (int t = 0; t < T; ++t) {
      const auto w = static_cast<std::size_t>(grid.rank(d / grid.shard, d % grid.shard, t));
      auto& g = gather.volume;
      auto& s = scatter.volume;
      ++g.calls_per_rank[w];
      ++s.calls_per_rank[w];
      if (t == owner) {  // receives the other T-1 gradient shards, sends T-1 update shards
        facts.gather_received[w] = checked_add(facts.gather_received[w],
                                               checked_mul(T - 1, grad_chunk, overflow), overflow);
        facts.scatter_sent[w] = checked_add(facts.scatter_sent[w],
                                            checked_mul(T - 1, update_chunk, overflow), overflow);
      } else {
        g.bytes_per_rank[w] = checked_add(g.bytes_per_rank[w], grad_chunk, overflow);
        s.bytes_per_rank[w] = checked_add(s.bytes_per_rank[w], update_chunk, overflow);
      }
    }
  }
  return {gather, scatter};
}

VolumeRow clip_term(int world) {
  auto norm =
      make_row(VolumeRoute::clip, CommGroup::world, CollectiveKind::all_reduce, Repeat::once);
  norm.volume.calls_per_rank.front() = 1;
  norm.volume.bytes_per_rank.front() =
      comm::counted_bytes(CollectiveKind::all_reduce, world, false, 1, 4);
  return norm;
}

namespace {

// The owner-based experts summed by the slot that owns them (every expert group alike).
struct ExpertOwnerSums {
  std::int64_t pairs = 0, params = 0, bytes = 0, grad_bytes = 0, master = 0;
  std::vector<std::int64_t> slot_bytes, slot_grad_bytes, slot_master;
};

}  // namespace

std::vector<VolumeRow> expert_term(const TermContext& c, const ExpertWays& ways,
                                   std::int64_t& sites) {
  sites = 0;
  const Plan& plan = c.plan;
  const int n = plan.expert_replicas();
  if (n == 1) return {};
  const RankGrid grid = plan.grid();  // R = T = 1 under --ep: DP rank d is world rank d
  const int world = grid.dp_size();
  constexpr auto route = VolumeRoute::expert;
  constexpr auto group = CommGroup::expert;
  auto gather = make_row(route, group, CollectiveKind::all_gather, Repeat::weight_pass);
  auto scatter = make_row(route, group, CollectiveKind::reduce_scatter, Repeat::once);
  auto nesterov = make_row(route, group, CollectiveKind::all_gather, Repeat::once);
  auto all_reduce = make_row(route, group, CollectiveKind::all_reduce, Repeat::once);
  ExpertOwnerSums s;
  for (auto* v : {&s.slot_bytes, &s.slot_grad_bytes, &s.slot_master})
    v->assign(static_cast<std::size_t>(n), 0);
  std::set<std::tuple<int, int, int>> buffers;  // (container, slot, type key)
  std::set<int> owner_containers;
  for (int pid : c.tree.parameter_order()) {
    if (!plan.is_expert(pid)) continue;
    const auto overflow = overflow_at(c, pid, "expert");
    const std::int64_t numel = numel_of(c, pid);
    const std::int64_t e = element_bytes(c.tree, plan, pid, c.wire_bytes);
    const std::int64_t eg = element_bytes(c.tree, plan, pid, c.reduce_bytes);
    const int slot = ways.owners ? plan.expert_owner(pid) : -1;
    if (slot >= 0) {
      const int container = model::expert_slot(c.tree, pid).container;
      owner_containers.insert(container);
      buffers.insert(
          {container, slot, packed_type_key(route_types(plan), pid, c.wire_bytes, c.reduce_bytes)});
      const auto j = static_cast<std::size_t>(slot);
      ++s.params;
      const std::int64_t bytes = checked_mul(e, numel, overflow);
      const std::int64_t grad = checked_mul(eg, numel, overflow);
      const std::int64_t master = checked_mul(4, numel, overflow);
      s.bytes = checked_add(s.bytes, bytes, overflow);
      s.grad_bytes = checked_add(s.grad_bytes, grad, overflow);
      s.master = checked_add(s.master, master, overflow);
      s.slot_bytes[j] += bytes;  // parts of the checked totals
      s.slot_grad_bytes[j] += grad;
      s.slot_master[j] += master;
    } else if (ways.replicas) {
      add(all_reduce, 1, checked_mul(eg, checked_mul(numel, n - 1, overflow) / n, overflow),
          overflow);
    } else {
      const std::int64_t rest = checked_mul(n - 1, shard_chunk(numel, n), overflow);
      add(gather, 1, checked_mul(e, rest, overflow), overflow);
      add(scatter, 1, checked_mul(eg, rest, overflow), overflow);
      if (ways.optimizer_gather && plan.muon(pid))
        add(nesterov, 1, checked_mul(e, rest, overflow), overflow);
    }
  }
  s.pairs = static_cast<std::int64_t>(buffers.size());
  std::vector<VolumeRow> rows;
  for (auto* r : {&gather, &scatter, &nesterov, &all_reduce})
    if (r->volume.calls_per_rank.front() > 0) rows.push_back(std::move(*r));
  if (s.params == 0) return rows;
  const bool packed = c.grad_reduce == GradReduce::packed;
  // dmuon broadcasts the packed weights every weight pass; ddp-dmuon publishes the updated
  // fp32 masters once.
  auto broadcast = make_row(route, group, CollectiveKind::broadcast,
                            ways.replicas ? Repeat::once : Repeat::weight_pass, world);
  auto reduce = make_row(route, group, CollectiveKind::reduce, Repeat::once, world);
  for (int d = 0; d < world; ++d) {
    const auto j = static_cast<std::size_t>(grid.expert_replica(d));
    set(broadcast, d, s.pairs,
        ways.replicas ? s.master - s.slot_master[j] : s.bytes - s.slot_bytes[j]);
    set(reduce, d, packed ? s.pairs : s.params, s.grad_bytes - s.slot_grad_bytes[j]);
  }
  if (!ways.replicas) sites = static_cast<std::int64_t>(owner_containers.size());
  rows.push_back(std::move(broadcast));
  rows.push_back(std::move(reduce));
  return rows;
}

}  // namespace dmuon::plan
