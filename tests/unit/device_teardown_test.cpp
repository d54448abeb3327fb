// The error path's order on the host, with fake communicators that log what reaches them: after
// a failure every communicator is aborted and nothing synchronises; otherwise the device is
// synchronised once and nothing is aborted.
#include "dmuon/engine/exec/device_teardown.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dmuon::engine {
namespace {

using Log = std::vector<std::string>;

class LoggingCommunicator final : public comm::Communicator {
 public:
  LoggingCommunicator(std::string name, Log& log)
      : Communicator(comm::Backend::nccl, 0, 1), name_(std::move(name)), log_(log) {}
  void abort() noexcept override { log_.push_back("abort " + name_); }

 protected:
  void do_broadcast(void*, std::size_t, comm::DType, int) override {}
  void do_reduce(const void*, void*, std::size_t, comm::DType, int, ReduceOp) override {}
  void do_reduce_scatter(const void*, void*, std::size_t, comm::DType, ReduceOp) override {}
  void do_all_gather(const void*, void*, std::size_t, comm::DType) override {}
  void do_gather(const void*, void*, std::size_t, comm::DType, int) override {}
  void do_scatter(const void*, void*, std::size_t, comm::DType, int) override {}
  void do_all_reduce(const void*, void*, std::size_t, comm::DType, ReduceOp) override {}
  void do_all_to_all(const void*, void*, std::size_t, comm::DType) override {}
  void do_send(const void*, std::size_t, comm::DType, int) override {}
  void do_recv(void*, std::size_t, comm::DType, int) override {}
  void do_group_start() override {}
  std::unique_ptr<comm::detail::BatchState> do_group_end() override { return nullptr; }

 private:
  std::string name_;
  Log& log_;
};

TEST(DeviceTeardown, AfterAFailureEveryCommunicatorIsAbortedAndNothingSynchronises) {
  Log log;
  LoggingCommunicator shard("shard", log), replicate("replicate", log), world("world", log);
  {
    DeviceTeardown t([&] { log.push_back("synchronize"); });
    t.track(&shard);
    t.track(nullptr);  // a group this rank does not have
    t.track(&replicate);
    t.track(&world);
    t.abort();
    t.abort();  // a second failure path (the wait's timeout after the exception's) adds nothing
    EXPECT_TRUE(t.aborted());
    t.finish();
  }
  EXPECT_EQ(log, (Log{"abort shard", "abort replicate", "abort world"}));
}

TEST(DeviceTeardown, WithoutAFailureTheDeviceIsSynchronisedOnceAndNothingAborted) {
  Log log;
  LoggingCommunicator shard("shard", log);
  DeviceTeardown t([&] { log.push_back("synchronize"); });
  t.track(&shard);
  EXPECT_FALSE(t.aborted());
  t.finish();
  EXPECT_EQ(log, (Log{"synchronize"}));
}

TEST(DeviceTeardown, AFailingSynchronisationDoesNotLeaveTheDestructor) {
  DeviceTeardown t([] { throw std::runtime_error("cudaDeviceSynchronize: an illegal address"); });
  EXPECT_NO_THROW(t.finish());
}

}  // namespace
}  // namespace dmuon::engine
