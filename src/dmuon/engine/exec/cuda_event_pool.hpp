#pragma once
// Timing events recorded on CUDA streams and read back as elapsed times, created once and
// reused: the phase timer records a few per step, the trace clock one per traced op. Host code
// (cuda_backend.cpp only).

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "dmuon/comm/nccl_check.hpp"

namespace dmuon::engine {

class CudaEventPool {
 public:
  CudaEventPool() = default;
  ~CudaEventPool() {
    for (auto e : events_) cudaEventDestroy(e);
  }
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;

  /// Records a free event (a new one when none is) on `stream`; returns its index.
  std::size_t record(cudaStream_t stream) {
    std::size_t e = events_.size();
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      cudaEvent_t made = nullptr;
      DMUON_CHECK_CUDA(cudaEventCreate(&made));
      events_.push_back(made);
    }
    DMUON_CHECK_CUDA(cudaEventRecord(events_[e], stream));
    return e;
  }
  /// Whether event e has completed on its stream.
  bool complete(std::size_t e) const {
    const cudaError_t rc = cudaEventQuery(events_.at(e));
    if (rc == cudaErrorNotReady) return false;
    DMUON_CHECK_CUDA(rc);
    return true;
  }
  /// Milliseconds from event a to event b (both complete).
  double elapsed_ms(std::size_t a, std::size_t b) const {
    float ms = 0;
    DMUON_CHECK_CUDA(cudaEventElapsedTime(&ms, events_.at(a), events_.at(b)));
    return ms;
  }
  /// Event e may be recorded again.
  void release(std::size_t e) { free_.push_back(e); }
  /// Every event may be recorded again (handed out from index 0 up, as first made).
  void release_all() {
    free_.clear();
    for (std::size_t e = events_.size(); e-- > 0;) free_.push_back(e);
  }

 private:
  std::vector<cudaEvent_t> events_;
  std::vector<std::size_t> free_;
};

}  // namespace dmuon::engine
