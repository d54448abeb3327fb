#pragma once
// Private to kernels/host: the Kokkos views behind host::NsWorkspace (newton_schulz.hpp).

#include "kernels/host/views.hpp"
#include "kernels/newton_schulz.hpp"

namespace dmuon::kernels::host {

struct NsWorkspace::Impl {
  Impl(std::size_t rows, std::size_t cols);

  // The iterate and its successor, rows×cols in the caller's orientation (the wide X itself,
  // or Xᵀ when the parameter is tall: the transposition lives in the GEMM modes).
  detail::OwnedMat x, xn;
  // m×m products, m = min(rows, cols): X Xᵀ or R, the polynomial, Q and two temporaries.
  detail::OwnedMat a, b, q, t, u;
  // muon_step's NS input (momentum or Nesterov mix) and output, rows×cols.
  detail::OwnedMat muon_in, muon_out;
};

}  // namespace dmuon::kernels::host
