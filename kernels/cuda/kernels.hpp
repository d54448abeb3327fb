#pragma once
// CUDA/cuBLAS versions of the host kernels: same math and argument order, device pointers,
// a Context (stream + cuBLAS handle) first. No CUDA or Kokkos types appear here: streams are
// passed as `void*` (a cudaStream_t), so callers compile without nvcc and never #ifdef — a build
// without CUDA links a stub whose functions throw KernelError("CUDA kernels not compiled ...").
//
// Row-major storage like the host API. Storage types: fp32, bf16 or fp16 for the Newton–Schulz
// matrices (GEMMs accumulate in fp32, the Frobenius norm is computed in fp32); optimizer state
// (weights, momentum, AdamW moments) is fp32.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/adamw.hpp"
#include "kernels/muon.hpp"
#include "kernels/ns_coefficients.hpp"
#include "kernels/pack.hpp"

namespace dmuon::kernels::cuda {

enum class Storage { f32, bf16, f16 };
std::size_t storage_bytes(Storage storage);
std::string_view to_string(Storage storage);

/// True when this build contains the CUDA kernels (DMUON_ENABLE_CUDA=ON).
bool compiled();

/// Number of visible GPUs. Throws KernelError carrying cudaGetDeviceCount's message when the
/// runtime reports an error (e.g. no driver / no GPU), so callers can say so clearly.
int device_count();

/// A stream (borrowed, or the legacy default stream when null) and a cuBLAS handle bound to it.
class Context {
 public:
  explicit Context(void* stream = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  void* stream() const;
  void synchronize() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// Device scratch for one shape and storage type, allocated once (reuse in the hot loop).
class NsWorkspace {
 public:
  NsWorkspace(std::size_t rows, std::size_t cols, Storage storage);
  ~NsWorkspace();
  NsWorkspace(const NsWorkspace&) = delete;
  NsWorkspace& operator=(const NsWorkspace&) = delete;
  std::size_t rows() const;
  std::size_t cols() const;
  Storage storage() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// out = NS(g); g and out are rows×cols device matrices in `storage` (may alias). Non-finite
/// input throws KernelError naming `name` (one 8-byte device→host copy + stream sync per call).
void newton_schulz(Context& ctx, const void* g, void* out, std::size_t rows, std::size_t cols,
                   Storage storage, const NsConfig& config, NsWorkspace& workspace,
                   std::string_view name = "");

/// One Muon step (fp32 weight/grad/momentum; NS in the workspace's storage type).
void muon_step(Context& ctx, float* weight, const float* grad, float* momentum_buf,
               std::size_t rows, std::size_t cols, long step, const MuonConfig& config,
               NsWorkspace& workspace, std::string_view name = "");

/// One AdamW step on n fp32 elements (same formula as host::adamw_step).
void adamw_step(Context& ctx, float* weight, const float* grad, float* exp_avg, float* exp_avg_sq,
                std::size_t n, long step, const AdamWConfig& config, std::string_view name = "");

std::size_t pack(Context& ctx, const ConstSlice* parts, std::size_t num_parts, float* dst,
                 std::size_t dst_size);
void unpack(Context& ctx, const float* src, std::size_t src_size, const Slice* parts,
            std::size_t num_parts);
void average_gradient(Context& ctx, float* grad, std::size_t n, int num_contributors);

/// c = alpha·op(a)·op(b) + beta·c, row-major, inputs/outputs in `storage`, fp32 accumulation.
void gemm(Context& ctx, Storage storage, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const void* a, const void* b, float beta, void* c);

/// Elementwise fp32 <-> storage conversion on the device.
void convert_from_f32(Context& ctx, const float* src, void* dst, std::size_t n, Storage storage);
void convert_to_f32(Context& ctx, const void* src, float* dst, std::size_t n, Storage storage);

/// Minimal device memory helpers (tests, benchmarks); all checked.
void* device_alloc(std::size_t bytes);
void device_free(void* ptr) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);

/// CUDA events on the context's stream: start(); ...; stop_ms() returns elapsed milliseconds.
class EventTimer {
 public:
  explicit EventTimer(Context& ctx);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  float stop_ms();

 private:
  void* stream_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace dmuon::kernels::cuda
