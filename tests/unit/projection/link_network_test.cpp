// The link network's event loop terminates at any simulated time: late in a long projected
// run (here 1e12 s) a flow's last remainder is below the clock's resolution, and waiting for
// it used to spin forever (issue 24: a 1e308 us kernel overhead hung dmuon_project).

#include <gtest/gtest.h>

#include <vector>

#include "dmuon/project/link_network.hpp"

namespace {

using dmuon::engine::CommGroup;
using dmuon::project::Level;
using dmuon::project::LinkNetwork;

// Runs the network to idle; returns the number of events (bounded: no spin).
int drain(LinkNetwork& net, double& end) {
  std::vector<int> finished;
  int events = 0;
  while (!net.idle() && events < 1000) {
    const double t = net.next_event();
    net.advance(t, finished);
    end = t;
    ++events;
  }
  return events;
}

TEST(LinkNetwork, FinishesFlowsLateInALongRun) {
  for (double start : {0.0, 1e4, 1e9, 1e12, 1e300}) {
    LinkNetwork net(1, 2);
    // Two flows sharing a row port: rates change mid-transfer, leaving rounded remainders.
    net.start(start, CommGroup::shard, 0, Level::intra, 1e-6, 3e-3);
    net.start(start, CommGroup::shard, 0, Level::intra, 2e-6, 1e-3 / 3);
    double end = 0;
    EXPECT_LT(drain(net, end), 1000) << "start " << start;
    EXPECT_TRUE(net.idle()) << "start " << start;
    EXPECT_GE(end, start);
  }
}

TEST(LinkNetwork, SharesTheLinkExactlyAtSmallTimes) {
  LinkNetwork net(1, 1);
  net.start(0, CommGroup::shard, 0, Level::intra, 0, 2.0);
  net.start(0, CommGroup::shard, 0, Level::intra, 0, 1.0);
  double end = 0;
  drain(net, end);
  EXPECT_DOUBLE_EQ(end, 3.0);  // both at half rate until 2 s, then the first alone
}

}  // namespace
