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

#include <cstdint>
#include <vector>

#include "dmuon/engine/run_result.hpp"

namespace dmuon::project {

enum class Level : std::uint8_t { intra = 0, inter = 1 };

class LinkNetwork {
 public:
  /// A grid of `rows` × `columns` ranks.
  LinkNetwork(int rows, int columns);

  /// Starts a flow at `now` on row/column `index`; returns its id.
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
  // Per level: loads of rows and columns, and a histogram of them for the running maxima.
  struct Loads {
    std::vector<int> row, column;
    std::vector<int> row_hist, column_hist;  // how many rows/columns carry each load
    int row_max = 0, column_max = 0;
  };
  void load(const Flow& f, int delta);
  void update_rates();
  static void bump(std::vector<int>& load, std::vector<int>& hist, int& max, int i, int delta);

  int rows_, columns_;
  Loads loads_[2];
  std::vector<Flow> flows_;
  std::vector<int> active_;  // ids of unfinished flows
  double now_ = 0;
};

}  // namespace dmuon::project
