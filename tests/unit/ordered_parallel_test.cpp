// ordered_parallel (base/ordered_parallel.hpp): results reach the consumer in index order
// whatever the thread count and window, and a failure on either side stops everything and is
// rethrown (no hang, no lost exception).

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "dmuon/base/ordered_parallel.hpp"

namespace {

using dmuon::ordered_parallel;

// Work whose length varies with i, so that later items often finish first.
long long work(int i) {
  long long s = 0;
  for (int k = 0; k < (i * 7919) % 5000; ++k) s += k % (i + 1);
  return s * 1000 + i;
}

TEST(OrderedParallel, ConsumesInIndexOrderWithTheSerialResults) {
  const int n = 500;
  std::vector<long long> serial;
  for (int i = 0; i < n; ++i) serial.push_back(work(i));
  for (int threads : {1, 2, 3, 8}) {
    for (int window : {1, 4, 64}) {
      std::vector<long long> got;
      std::vector<int> order;
      ordered_parallel<long long>(
          n, threads, window, [](int i) { return work(i); },
          [&](int i, long long&& v) {
            order.push_back(i);
            got.push_back(v);
          });
      ASSERT_EQ(got, serial) << threads << " threads, window " << window;
      for (int i = 0; i < n; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
    }
  }
}

TEST(OrderedParallel, NothingToDoAndMoreThreadsThanItems) {
  int calls = 0;
  ordered_parallel<int>(
      0, 4, 8, [](int i) { return i; }, [&](int, int&&) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::vector<int> got;
  ordered_parallel<int>(
      2, 16, 1, [](int i) { return 10 * i; }, [&](int, int&& v) { got.push_back(v); });
  EXPECT_EQ(got, (std::vector<int>{0, 10}));
}

TEST(OrderedParallel, AProducerFailureIsRethrownAndStopsTheRest) {
  std::atomic<int> produced{0};
  int consumed = 0;
  try {
    ordered_parallel<int>(
        10000, 3, 6,
        [&](int i) {
          ++produced;
          if (i == 37) throw std::runtime_error("item 37 failed");
          return i;
        },
        [&](int, int&&) { ++consumed; });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 37 failed");
  }
  EXPECT_LE(consumed, 37);
  EXPECT_LT(produced.load(), 10000);  // the window bounds what runs ahead
}

TEST(OrderedParallel, AConsumerFailureIsRethrownAndStopsTheWorkers) {
  std::atomic<int> produced{0};
  EXPECT_THROW(ordered_parallel<int>(
                   10000, 2, 4,
                   [&](int i) {
                     ++produced;
                     return i;
                   },
                   [&](int i, int&&) {
                     if (i == 5) throw std::logic_error("consumer");
                   }),
               std::logic_error);
  EXPECT_LT(produced.load(), 100);
}

}  // namespace
