#pragma once
// Runs produce(i) for i in [0, n) on worker threads and consume(i, result) on the calling
// thread in index order, with at most `window` results produced and not yet consumed. For work
// whose items are independent but whose results must be folded into shared state in a fixed
// order (the projection compiles one program per rank, then stores them in rank order): the
// result equals the serial loop's, whatever the thread count.
//
// An exception thrown by produce or consume stops the workers and is rethrown here (the first
// one, by completion); nothing is left running.

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace dmuon {

/// Worker threads for CPU-bound work on this machine: its hardware threads, at least 1.
inline int hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

template <class T, class Produce, class Consume>
void ordered_parallel(int n, int threads, int window, Produce produce, Consume consume) {
  threads = std::min(threads, n);
  if (threads <= 1) {
    for (int i = 0; i < n; ++i) consume(i, produce(i));
    return;
  }
  window = std::max(window, threads);
  std::vector<std::optional<T>> ring(static_cast<std::size_t>(window));
  std::mutex m;
  std::condition_variable changed;
  int next = 0, consumed = 0;  // next item to claim; items consumed so far
  std::exception_ptr error;
  auto slot = [&](int i) -> std::optional<T>& {
    return ring[static_cast<std::size_t>(i % window)];
  };
  auto work = [&] {
    for (;;) {
      int i = 0;
      {
        std::unique_lock<std::mutex> lock(m);
        changed.wait(lock, [&] { return error || next >= n || next < consumed + window; });
        if (error || next >= n) return;
        i = next++;
      }
      std::optional<T> result;
      try {
        result.emplace(produce(i));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        changed.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(m);
      slot(i) = std::move(result);
      changed.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(work);
  for (int i = 0; i < n; ++i) {
    std::optional<T> item;
    {
      std::unique_lock<std::mutex> lock(m);
      changed.wait(lock, [&] { return error || slot(i).has_value(); });
      if (error) break;
      item = std::move(slot(i));
      slot(i).reset();
    }
    try {
      consume(i, std::move(*item));
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m);
    ++consumed;
    changed.notify_all();
    if (error) break;
  }
  changed.notify_all();
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace dmuon
