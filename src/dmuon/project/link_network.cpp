#include "dmuon/project/link_network.hpp"

#include <algorithm>
#include <limits>

namespace dmuon::project {
namespace {

// Times are seconds; a picosecond is far below anything the model resolves.
constexpr double kEps = 1e-12;

}  // namespace

LinkNetwork::LinkNetwork(int rows, int columns) : rows_(rows), columns_(columns) {
  for (auto& l : loads_) {
    l.row.assign(static_cast<std::size_t>(rows), 0);
    l.column.assign(static_cast<std::size_t>(columns), 0);
    l.row_hist = {rows};
    l.column_hist = {columns};
  }
}

void LinkNetwork::bump(std::vector<int>& load, std::vector<int>& hist, int& max, int i, int delta) {
  const int old = load[static_cast<std::size_t>(i)];
  const int now = old + delta;
  load[static_cast<std::size_t>(i)] = now;
  --hist[static_cast<std::size_t>(old)];
  if (static_cast<std::size_t>(now) >= hist.size())
    hist.resize(static_cast<std::size_t>(now) + 1, 0);
  ++hist[static_cast<std::size_t>(now)];
  if (now > max) max = now;
  while (max > 0 && hist[static_cast<std::size_t>(max)] == 0) --max;
}

void LinkNetwork::load(const Flow& f, int delta) {
  if (f.comm == engine::CommGroup::world) return;  // see link_network.hpp
  auto& l = loads_[static_cast<int>(f.level)];
  if (f.comm == engine::CommGroup::shard)
    bump(l.row, l.row_hist, l.row_max, f.index, delta);
  else
    bump(l.column, l.column_hist, l.column_max, f.index, delta);
}

int LinkNetwork::start(double now, engine::CommGroup comm, int index, Level level, double latency_s,
                       double transfer_s) {
  Flow f;
  f.comm = comm;
  f.index = index;
  f.level = level;
  f.latency_end = now + std::max(0.0, latency_s);
  f.remaining = std::max(0.0, transfer_s);
  f.transferring = false;
  f.rate = 1.0;
  flows_.push_back(f);
  const int id = static_cast<int>(flows_.size()) - 1;
  active_.push_back(id);
  return id;
}

double LinkNetwork::next_event() const {
  double t = std::numeric_limits<double>::infinity();
  for (int id : active_) {
    const Flow& f = flows_[static_cast<std::size_t>(id)];
    t = std::min(t, f.transferring ? now_ + f.remaining / f.rate : f.latency_end);
  }
  return t;
}

void LinkNetwork::advance(double t, std::vector<int>& finished) {
  const double dt = std::max(0.0, t - now_);
  for (int id : active_) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    if (f.transferring) f.remaining -= dt * f.rate;
  }
  now_ = std::max(now_, t);
  bool changed = false;
  std::vector<int> still;
  still.reserve(active_.size());
  for (int id : active_) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    if (!f.transferring && f.latency_end <= now_ + kEps) {
      f.transferring = true;
      load(f, +1);
      changed = true;
    }
    if (f.transferring && f.remaining <= kEps) {
      load(f, -1);
      finished.push_back(id);
      changed = true;
      continue;
    }
    still.push_back(id);
  }
  active_.swap(still);
  if (changed) update_rates();
}

void LinkNetwork::update_rates() {
  for (int id : active_) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    if (!f.transferring) continue;
    if (f.comm == engine::CommGroup::world) continue;  // rate 1: see link_network.hpp
    const auto& l = loads_[static_cast<int>(f.level)];
    const int share = f.comm == engine::CommGroup::shard
                          ? l.row[static_cast<std::size_t>(f.index)] + l.column_max
                          : l.column[static_cast<std::size_t>(f.index)] + l.row_max;
    f.rate = 1.0 / std::max(1, share);
  }
}

}  // namespace dmuon::project
