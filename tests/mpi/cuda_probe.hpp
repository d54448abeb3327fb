#pragma once
// Test-only view of the CUDA runtime, so the NCCL test needs no CUDA headers: the real
// version (cuda_probe.cpp) is built when the library has NCCL, a stub otherwise.

#include <cstddef>

namespace dmuon::test {

/// Number of visible CUDA devices; 0 when the runtime reports an error (no driver/device).
int visible_cuda_devices();
void* device_alloc(std::size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);

}  // namespace dmuon::test
