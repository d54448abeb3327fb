#pragma once
// Batches in flight on the modelled links, and how they share bandwidth.
//
// A batch (the collectives one issue op puts on a communicator, launched together as one
// NCCL group) is one flow: first its latency (not shared), then its transfer, which needs
// `transfer_s` seconds at the full link rate. Every rank has one port per link level (intra:
// NVLink; inter: the NIC); a flow loads the port of its level on each of its ranks. While k
// flows load a port, each gets 1/k of it, and a flow advances at the rate of its most loaded
// port: rate = 1 / max over its ranks of (flows on that port). Rates change only when a flow
// enters or leaves its transfer, so the model is event-driven and exact for piecewise-constant
// rates (processor sharing).
//
// Communicators are rows (a shard group: ranks row·G .. row·G + G − 1) or columns (a replicate
// group: ranks column, column + G, …) of an R × G grid (DDP: one row of all ranks). A rank's
// load on a port is then row_load[row] + column_load[column], and the most loaded rank of a row
// is its row load plus the largest column load: O(1) per flow with running maxima.
// A world flow (--clip-norm's all-reduce of one fp32 over every rank) moves a few bytes: it
// takes its latency and transfer at the full rate and loads no port.
// --tp: rows and columns are those of each DP group (index row · T + t, column · T + t) and a
// third kind of communicator, the TP groups, loads ports too; a flow's most loaded rank is
// bounded by its own communicator's load plus the largest load of each other kind (exact for
// T = 1, where there is no TP group; an upper bound on the sharing otherwise). --ep E < G: the
// expert groups (base/rank_grid.hpp) are a fourth kind, bounded the same way.

#include <cstdint>
#include <vector>

#include "dmuon/engine/step/run_result.hpp"

namespace dmuon::project {

enum class Level : std::uint8_t { intra = 0, inter = 1 };

class LinkNetwork {
 public:
  /// A grid of `rows` × `columns` ranks (their communicators), `tp_groups` TP groups and
  /// `expert_groups` expert groups.
  LinkNetwork(int rows, int columns, int tp_groups = 0, int expert_groups = 0);

  /// Starts a flow at `now` on row/column/TP/expert group `index`; returns its id.
  int start(double now, engine::CommGroup comm, int index, Level level, double latency_s,
            double transfer_s);
  /// Absolute time of the next flow event (end of a latency or of a transfer); +inf if idle.
  double next_event() const;
  /// Advances to `t` (<= next_event()), appending the flows that finished at t.
  void advance(double t, std::vector<int>& finished);
  bool idle() const { return active_.empty(); }
  int active() const { return static_cast<int>(active_.size()); }

 private:
  struct Flow {
    engine::CommGroup comm;
    int index;
    Level level;
    double latency_end;
    double remaining;  // transfer seconds at full rate
    bool transferring;
    double rate;
  };
  // Per level: loads of rows, columns and TP groups, and a histogram of each for the running
  // maxima.
  struct Load {
    std::vector<int> of;    // per index
    std::vector<int> hist;  // how many indices carry each load
    int max = 0;
  };
  struct Loads {
    Load row, column, tp, expert;
  };
  void load(const Flow& f, int delta);
  void update_rates();
  static void bump(Load& load, int i, int delta);
  static Load& of(Loads& l, engine::CommGroup comm);

  Loads loads_[2];
  std::vector<Flow> flows_;
  std::vector<int> active_;  // ids of unfinished flows
  double now_ = 0;
};

}  // namespace dmuon::project
