#include "dmuon/base/rank_grid.hpp"

#include <fmt/format.h>

#include <climits>

#include "dmuon/base/error.hpp"

namespace dmuon {

const char* comm_group_name(CommGroup g) {
  switch (g) {
    case CommGroup::shard: return "shard";
    case CommGroup::replicate: return "replicate";
    case CommGroup::world: return "world";
    case CommGroup::tp: return "tp";
    case CommGroup::expert: return "expert";
    case CommGroup::ep: return "ep";
    case CommGroup::pipeline: return "pipeline";
  }
  return "?";
}

const char* comm_group_word(CommGroup g) {
  switch (g) {
    case CommGroup::shard: return "row";
    case CommGroup::replicate: return "column";
    case CommGroup::world: return "world";
    case CommGroup::tp: return "TP group";
    case CommGroup::expert: return "expert group";
    case CommGroup::ep: return "EP group";
    case CommGroup::pipeline: return "pipeline group";
  }
  return "?";
}

RankGrid RankGrid::of(int replicate, int shard, int tp) {
  if (replicate < 1 || shard < 1 || tp < 1)
    throw InputError(fmt::format("rank grid R={} x G={} x T={} is invalid (each must be >= 1)",
                                 replicate, shard, tp));
  if (static_cast<long long>(replicate) * shard * tp > INT_MAX)
    throw InputError(fmt::format("rank grid R={} x G={} x T={} exceeds {} ranks", replicate, shard,
                                 tp, INT_MAX));
  return RankGrid{replicate, shard, tp};
}

int RankGrid::group_size(CommGroup g) const {
  switch (g) {
    case CommGroup::shard: return shard;
    case CommGroup::replicate: return replicate;
    case CommGroup::world: return world();
    case CommGroup::tp: return tp;
    case CommGroup::expert: return expert_replicas();
    case CommGroup::ep: return ep;
    case CommGroup::pipeline: return 1;  // the other stages are outside a stage's grid
  }
  return 1;
}

int RankGrid::instances(CommGroup g) const {
  switch (g) {
    case CommGroup::shard: return replicate * tp;
    case CommGroup::replicate: return shard * tp;
    case CommGroup::world: return 1;
    case CommGroup::tp: return dp_size();
    case CommGroup::expert: return replicate * tp * ep;
    case CommGroup::ep: return replicate * tp * expert_replicas();
    case CommGroup::pipeline: return world();
  }
  return 1;
}

int RankGrid::instance(int w, CommGroup g) const {
  switch (g) {
    case CommGroup::shard: return row(w) * tp + tp_index(w);
    case CommGroup::replicate: return column(w) * tp + tp_index(w);
    case CommGroup::world: return 0;
    case CommGroup::tp: return dp(w);
    case CommGroup::expert: return (row(w) * ep + ep_rank(w)) * tp + tp_index(w);
    case CommGroup::ep: return (row(w) * expert_replicas() + expert_replica(w)) * tp + tp_index(w);
    case CommGroup::pipeline: return w;
  }
  return 0;
}

int RankGrid::member(int w, CommGroup g) const {
  switch (g) {
    case CommGroup::shard: return column(w);
    case CommGroup::replicate: return row(w);
    case CommGroup::world: return w;
    case CommGroup::tp: return tp_index(w);
    case CommGroup::expert: return expert_replica(w);
    case CommGroup::ep: return ep_rank(w);
    case CommGroup::pipeline: return 0;
  }
  return 0;
}

int RankGrid::rank_of(CommGroup g, int instance, int member) const {
  switch (g) {
    case CommGroup::shard: return rank(instance / tp, member, instance % tp);
    case CommGroup::replicate: return rank(member, instance / tp, instance % tp);
    case CommGroup::world: return member;
    case CommGroup::tp: return instance * tp + member;
    case CommGroup::expert: {
      const int t = instance % tp, row_ep = instance / tp;
      return rank(row_ep / ep, member * ep + row_ep % ep, t);
    }
    case CommGroup::ep: {
      const int t = instance % tp, row_replica = instance / tp;
      return rank(row_replica / expert_replicas(), (row_replica % expert_replicas()) * ep + member,
                  t);
    }
    case CommGroup::pipeline: return instance;
  }
  return member;
}

void RankGrid::require_rank(int w) const {
  if (w < 0 || w >= world())
    throw InputError(fmt::format("rank {} is outside the world of {} (R={} x G={} x T={})", w,
                                 world(), replicate, shard, tp));
}

}  // namespace dmuon
