#pragma once
// The rank grid every part of the suite shares: world = R replicate rows × G shard columns ×
// T tensor-parallel ranks, world rank w = (r·G + s)·T + t (TP fastest, as Megatron orders
// it). The communicators a step uses are groups of this grid:
//   shard      a row of one DP group: the G ranks with the same (r, t); member index s
//   replicate  a column of one DP group: the R ranks with the same (s, t); member index r
//   world      every rank; member index w
//   tp         the T ranks of one DP rank d = r·G + s; member index t
//   expert     --ep E < G: the G/E ranks of a row whose columns are equal mod E (they hold the
//              same routed experts: EP rank e = s mod E); member index s div E. E = 1: the
//              row; E = G: the rank alone
//   ep         --ep E > 1: the E ranks of a row whose columns are equal div E (one of each EP
//              rank: the group the routed tokens' all-to-alls run over); member index s mod E.
//              E = G: the row; E = 1: the rank alone
//   pipeline   --pp P (the engine's pipeline stages): the grid is one stage's world; the rank
//              at the same place in each of the P stages, split from the whole world by the
//              engine (engine.hpp), not from a stage's grid: inside the grid the rank alone
// T = 1 is the 1-D / HSDP world of SPEC §6; R = 1 is 1-D DMuon. Pure value type: no MPI.

#include <array>
#include <cstddef>

namespace dmuon {

/// The communicators of a step (one per group kind of the grid).
enum class CommGroup {
  shard = 0,
  replicate = 1,
  world = 2,
  tp = 3,
  expert = 4,
  ep = 5,
  pipeline = 6
};
inline constexpr std::size_t kCommGroupCount = 7;
inline constexpr std::array<CommGroup, kCommGroupCount> kAllCommGroups = {
    CommGroup::shard,  CommGroup::replicate, CommGroup::world,   CommGroup::tp,
    CommGroup::expert, CommGroup::ep,        CommGroup::pipeline};
/// "shard", "replicate", "world", "tp", "expert", "ep", "pipeline".
const char* comm_group_name(CommGroup g);
/// As messages and traces say it: "row", "column", "world", "TP group", "expert group",
/// "EP group", "pipeline group".
const char* comm_group_word(CommGroup g);

struct RankGrid {
  int replicate = 1;  ///< R
  int shard = 1;      ///< G
  int tp = 1;         ///< T
  /// E, the expert-parallel degree of a row (--ep; 1 without EP): a divisor of G.
  int ep = 1;

  /// Throws InputError unless R, G and T are >= 1 and their product fits an int.
  static RankGrid of(int replicate, int shard, int tp = 1);

  int world() const { return replicate * shard * tp; }
  /// R × G: the ranks of one DP group (one TP index).
  int dp_size() const { return replicate * shard; }

  int dp(int w) const { return w / tp; }  ///< d = r·G + s
  int row(int w) const { return dp(w) / shard; }
  int column(int w) const { return dp(w) % shard; }
  int tp_index(int w) const { return w % tp; }
  /// --ep: the EP rank of w (its column mod E) and its index among the replicas of its
  /// experts (column div E).
  int ep_rank(int w) const { return column(w) % ep; }
  int expert_replica(int w) const { return column(w) / ep; }
  /// G / E: the ranks of one expert group.
  int expert_replicas() const { return shard / ep; }
  /// --ep E < G: the expert groups hold several ranks and communicate.
  bool has_expert_groups() const { return ep > 1 && expert_replicas() > 1; }
  int rank(int row, int column, int t = 0) const { return (row * shard + column) * tp + t; }

  int group_size(CommGroup g) const;
  /// How many instances of group `g` the world has (shard: R·T rows, replicate: G·T columns,
  /// world: 1, tp: R·G, expert: R·T·E, ep: R·T·G/E).
  int instances(CommGroup g) const;
  /// The instance of `g` world rank w belongs to, and w's index inside it.
  int instance(int w, CommGroup g) const;
  int member(int w, CommGroup g) const;
  /// The world rank of member `member` of instance `instance` of `g`.
  int rank_of(CommGroup g, int instance, int member) const;
  /// Throws InputError unless 0 <= w < world().
  void require_rank(int w) const;

  bool operator==(const RankGrid& o) const {
    return replicate == o.replicate && shard == o.shard && tp == o.tp && ep == o.ep;
  }
  bool operator!=(const RankGrid& o) const { return !(*this == o); }
};

/// One rank's place in a grid: the grid and its world rank, with the coordinates at hand.
struct GridRank {
  RankGrid grid;
  int rank = 0;  ///< world rank

  int dp() const { return grid.dp(rank); }
  int row() const { return grid.row(rank); }
  int column() const { return grid.column(rank); }
  int tp_index() const { return grid.tp_index(rank); }
  int ep_rank() const { return grid.ep_rank(rank); }
  int expert_replica() const { return grid.expert_replica(rank); }
  int member(CommGroup g) const { return grid.member(rank, g); }
};

}  // namespace dmuon
