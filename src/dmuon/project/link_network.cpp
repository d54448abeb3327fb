#include "dmuon/project/link_network.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace dmuon::project {
namespace {

// Times are seconds; a picosecond is far below anything the model resolves.
constexpr double kEps = 1e-12;

}  // namespace

LinkNetwork::LinkNetwork(int rows, int columns, int tp_groups, int expert_groups) {
  for (auto& l : loads_) {
    const std::pair<Load*, int> sizes[] = {
        {&l.row, rows}, {&l.column, columns}, {&l.tp, tp_groups}, {&l.expert, expert_groups}};
    for (const auto& [load, n] : sizes) {
      load->of.assign(static_cast<std::size_t>(n), 0);
      load->hist = {n};
    }
  }
}

void LinkNetwork::bump(Load& l, int i, int delta) {
  const int old = l.of[static_cast<std::size_t>(i)];
  const int now = old + delta;
  l.of[static_cast<std::size_t>(i)] = now;
  --l.hist[static_cast<std::size_t>(old)];
  if (static_cast<std::size_t>(now) >= l.hist.size())
    l.hist.resize(static_cast<std::size_t>(now) + 1, 0);
  ++l.hist[static_cast<std::size_t>(now)];
  if (now > l.max) l.max = now;
  while (l.max > 0 && l.hist[static_cast<std::size_t>(l.max)] == 0) --l.max;
}

LinkNetwork::Load& LinkNetwork::of(Loads& l, engine::CommGroup comm) {
  switch (comm) {
    case engine::CommGroup::shard: return l.row;
    case engine::CommGroup::tp: return l.tp;
    case engine::CommGroup::expert: return l.expert;
    default: return l.column;
  }
}

void LinkNetwork::load(const Flow& f, int delta) {
  if (f.comm == engine::CommGroup::world) return;  // see link_network.hpp
  bump(of(loads_[static_cast<int>(f.level)], f.comm), f.index, delta);
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
    // A remainder the clock cannot resolve (now_ + it == now_, once simulated time is large)
    // is done: waiting for it would make no progress and spin forever.
    if (f.transferring && (f.remaining <= kEps || now_ + f.remaining / f.rate <= now_)) {
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
    auto& l = loads_[static_cast<int>(f.level)];
    // Its own communicator's load plus the largest of each other kind (link_network.hpp).
    const int share = of(l, f.comm).of[static_cast<std::size_t>(f.index)] + l.row.max +
                      l.column.max + l.tp.max + l.expert.max - of(l, f.comm).max;
    f.rate = 1.0 / std::max(1, share);
  }
}

}  // namespace dmuon::project
