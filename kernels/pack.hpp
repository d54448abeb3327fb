#pragma once
// Packing several parameters into one contiguous per-owner buffer and back (the engine's
// packed broadcasts), and gradient averaging. These kernels only write: call host::fence()
// (scoped_kokkos.hpp) before their output goes to MPI.

#include <cstddef>

namespace dmuon::kernels {

/// A read-only piece of a packed buffer: `size` floats at `data`.
struct ConstSlice {
  const float* data;
  std::size_t size;
};
/// A writable piece of a packed buffer.
struct Slice {
  float* data;
  std::size_t size;
};

}  // namespace dmuon::kernels

namespace dmuon::kernels::host {

/// Copies parts[0..num_parts) back to back into dst (capacity dst_size floats); returns the
/// number of floats written. Throws KernelError if they do not fit. Bit-exact copies.
std::size_t pack(const ConstSlice* parts, std::size_t num_parts, float* dst, std::size_t dst_size);

/// Inverse of pack: splits src (src_size floats) into parts; src_size must equal the sum.
void unpack(const float* src, std::size_t src_size, const Slice* parts, std::size_t num_parts);

/// grad *= 1 / num_contributors (mean of a sum-reduced gradient). num_contributors >= 1.
void average_gradient(float* grad, std::size_t n, int num_contributors);

/// dst = src (a STREAM-like copy through Kokkos, the bandwidth yardstick of the benchmarks).
void copy(const float* src, float* dst, std::size_t n);

/// Memory traffic of a memory-bound op: reads `read` floats of src (summed, so the reads
/// happen) and writes `written` floats of dst (each a function of that sum); returns the sum.
/// What the engine runs for an activation op whose cost, not its result, matters.
float stream(const float* src, std::size_t read, float* dst, std::size_t written);

}  // namespace dmuon::kernels::host
