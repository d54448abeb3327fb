#include "kernels/pack.hpp"

#include <string>

#include "kernels/host/views.hpp"
#include "kernels/kernel_error.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace dmuon::kernels::host {

namespace {
std::size_t total_size(const ConstSlice* parts, std::size_t num) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < num; ++i) {
    if (parts[i].data == nullptr && parts[i].size != 0) {
      throw KernelError("pack: part " + std::to_string(i) + " is null with size " +
                        std::to_string(parts[i].size));
    }
    total += parts[i].size;
  }
  return total;
}
}  // namespace

void copy(const float* src, float* dst, std::size_t n) {
  require_kokkos("copy");
  detail::require_data(src, n, "copy", "source");
  detail::require_data(dst, n, "copy", "destination");
  const detail::ConstVec s(src, n);
  const detail::Vec d(dst, n);
  Kokkos::parallel_for(
      "dmuon::copy", detail::range(n), KOKKOS_LAMBDA(const std::size_t i) { d(i) = s(i); });
}

float stream(const float* src, std::size_t read, float* dst, std::size_t written) {
  require_kokkos("stream");
  detail::require_data(src, read, "stream", "source");
  detail::require_data(dst, written, "stream", "destination");
  const detail::ConstVec s(src, read);
  const detail::Vec d(dst, written);
  float sum = 0;
  Kokkos::parallel_reduce(
      "dmuon::stream_read", detail::range(read),
      KOKKOS_LAMBDA(const std::size_t i, float& acc) { acc += s(i); }, sum);
  const float base = sum * 1e-30f;
  Kokkos::parallel_for(
      "dmuon::stream_write", detail::range(written),
      KOKKOS_LAMBDA(const std::size_t i) { d(i) = base + static_cast<float>(i & 1023u); });
  return sum;
}

std::size_t pack(const ConstSlice* parts, std::size_t num_parts, float* dst, std::size_t dst_size) {
  require_kokkos("pack");
  const std::size_t total = total_size(parts, num_parts);
  if (total > dst_size) {
    throw KernelError("pack: parts hold " + std::to_string(total) +
                      " floats but the packed buffer has room for " + std::to_string(dst_size));
  }
  std::size_t offset = 0;
  for (std::size_t i = 0; i < num_parts; ++i) {
    copy(parts[i].data, dst + offset, parts[i].size);
    offset += parts[i].size;
  }
  return total;
}

void unpack(const float* src, std::size_t src_size, const Slice* parts, std::size_t num_parts) {
  require_kokkos("unpack");
  std::size_t total = 0;
  for (std::size_t i = 0; i < num_parts; ++i) {
    if (parts[i].data == nullptr && parts[i].size != 0) {
      throw KernelError("unpack: part " + std::to_string(i) + " is null with size " +
                        std::to_string(parts[i].size));
    }
    total += parts[i].size;
  }
  if (total != src_size) {
    throw KernelError("unpack: parts hold " + std::to_string(total) +
                      " floats but the packed buffer has " + std::to_string(src_size));
  }
  std::size_t offset = 0;
  for (std::size_t i = 0; i < num_parts; ++i) {
    copy(src + offset, parts[i].data, parts[i].size);
    offset += parts[i].size;
  }
}

void average_gradient(float* grad, std::size_t n, int num_contributors) {
  require_kokkos("average_gradient");
  if (num_contributors < 1) {
    throw KernelError("average_gradient: number of contributors must be >= 1, got " +
                      std::to_string(num_contributors));
  }
  detail::require_data(grad, n, "average_gradient", "gradient");
  const detail::Vec g(grad, n);
  const float inv = 1.0f / static_cast<float>(num_contributors);
  Kokkos::parallel_for(
      "dmuon::average_gradient", detail::range(n),
      KOKKOS_LAMBDA(const std::size_t i) { g(i) *= inv; });
}

}  // namespace dmuon::kernels::host
