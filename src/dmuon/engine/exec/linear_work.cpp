#include "dmuon/engine/exec/linear_work.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <vector>

#include "dmuon/engine/step/accumulation.hpp"
#include "kernels/linear.hpp"

namespace dmuon::engine {

namespace {
using Exec = Kokkos::DefaultHostExecutionSpace;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
}  // namespace

// Row-major b×cols inputs and b×rows outputs/targets of this rank's samples, per slot (a
// micro-batch in flight); dX is discarded: one for all.
struct LinearWork::Buffers {
  struct Saved {
    Matrix x, y, t;
  };
  std::vector<Saved> slots;
  Matrix dx;
};

LinearWork::LinearWork(const model::ModuleTree& tree, int pid, std::int64_t global_tokens, int rank,
                       int ranks, int accum, std::uint64_t key, Compute compute, int in_flight)
    : pid_(pid),
      key_(key == kPidKey ? static_cast<std::uint64_t>(pid) : key),
      shape_(matrix_shape(tree.parameter(pid))),
      range_(sample_range(tree, pid, global_tokens, rank, ranks)),
      n_(range_.n),
      rank_(rank),
      ranks_(ranks),
      accum_(accum),
      buf_(std::make_unique<Buffers>()) {
  std::int64_t most = 0;  // the largest micro-batch's local samples (none: no GEMM runs)
  for (int j = 0; j < accum_ && compute == Compute::gemm; ++j)
    most = std::max(most, micro_sample_range(n_, j, accum_, rank_, ranks_).local());
  set_micro(0);
  const auto b = static_cast<std::size_t>(most);
  const auto rows = static_cast<std::size_t>(shape_.rows),
             cols = static_cast<std::size_t>(shape_.cols);
  buf_->slots.resize(static_cast<std::size_t>(std::max(1, in_flight)));
  for (auto& saved : buf_->slots) {
    saved.x = Matrix("dmuon::linear_x", b, cols);
    saved.y = Matrix("dmuon::linear_y", b, rows);
    saved.t = Matrix("dmuon::linear_target", b, rows);
  }
  buf_->dx = Matrix("dmuon::linear_dx", b, cols);
}

void LinearWork::set_micro(int micro) {
  range_ = micro_sample_range(n_, micro, accum_, rank_, ranks_);
  slot_ = micro % static_cast<int>(buf_ ? buf_->slots.size() : 1);
}

LinearWork::~LinearWork() = default;
LinearWork::LinearWork(LinearWork&&) noexcept = default;
LinearWork& LinearWork::operator=(LinearWork&&) noexcept = default;

std::int64_t LinearWork::bytes() const {
  std::size_t floats = buf_->dx.span();
  for (const auto& saved : buf_->slots) floats += saved.x.span() + saved.y.span() + saved.t.span();
  return static_cast<std::int64_t>(sizeof(float) * floats);
}

void LinearWork::forward(Compute compute, std::uint64_t seed, long step, const float* w,
                         const Between& between) {
  const std::int64_t b = local_samples();
  if (compute == Compute::none || b == 0 || shape_.cols == 0) return;
  const auto pid = key_;
  const auto st = static_cast<std::uint64_t>(step);
  const std::int64_t begin = range_.begin, rows = shape_.rows, cols = shape_.cols;
  const auto& saved = buf_->slots[static_cast<std::size_t>(slot_)];
  const Matrix x = saved.x, t = saved.t;
  // In blocks of rows, so MPI can progress between them (`between`) while this rank draws.
  constexpr std::int64_t kRowsPerBlock = 256;
  for (std::int64_t lo = 0; lo < b; lo += kRowsPerBlock) {
    const std::int64_t hi = std::min(b, lo + kRowsPerBlock);
    Kokkos::parallel_for(
        "dmuon::synthetic_rows", Kokkos::RangePolicy<Exec>(lo, hi),
        KOKKOS_LAMBDA(const std::int64_t s) {
          const auto sample = static_cast<std::uint64_t>(begin + s);
          synthetic_fill_row(seed, st, sample, pid, synthetic_stream::x, &x(s, 0), cols);
          synthetic_fill_row(seed, st, sample, pid, synthetic_stream::target, &t(s, 0), rows);
        });
    Kokkos::fence();
    if (between) between();
  }
  kernels::host::linear_forward(x.data(), w, saved.y.data(), static_cast<std::size_t>(b),
                                static_cast<std::size_t>(cols), static_cast<std::size_t>(rows));
}

void LinearWork::backward(Compute compute, std::uint64_t seed, long step, const float* w,
                          float* grad, const Between& between, bool accumulate) {
  const std::int64_t numel = shape_.rows * shape_.cols;
  if (compute == Compute::none) {
    if (accum_ == 1) {
      synthetic_fill_row(seed, static_cast<std::uint64_t>(step), 0, key_, synthetic_stream::none,
                         grad, numel);
      Kokkos::parallel_for(
          "dmuon::grad_none", Kokkos::RangePolicy<Exec>(0, numel),
          KOKKOS_LAMBDA(const std::int64_t i) { grad[i] += w[i]; });
      Kokkos::fence();
      return;
    }
    // Accumulation: each micro-step adds (u + w)/K (the loss averaged over the whole batch).
    std::vector<float> u(static_cast<std::size_t>(numel));
    synthetic_fill_row(seed, static_cast<std::uint64_t>(step), 0, key_, synthetic_stream::none,
                       u.data(), numel);
    const float inv = 1.0f / static_cast<float>(accum_);
    const float* up = u.data();
    Kokkos::parallel_for(
        "dmuon::grad_none_accum", Kokkos::RangePolicy<Exec>(0, numel),
        KOKKOS_LAMBDA(const std::int64_t i) {
          const float v = (up[i] + w[i]) * inv;
          grad[i] = accumulate ? grad[i] + v : v;
        });
    Kokkos::fence();
    return;
  }
  const std::int64_t b = local_samples();
  if (accumulate && (b == 0 || numel == 0)) return;  // this micro-batch adds nothing here
  if (b == 0 || numel == 0) {
    Kokkos::parallel_for(
        "dmuon::grad_zero", Kokkos::RangePolicy<Exec>(0, numel),
        KOKKOS_LAMBDA(const std::int64_t i) { grad[i] = 0.0f; });
    Kokkos::fence();
    return;
  }
  // dY = (Y − T)·G/n in place of Y: the mean over the global samples (synthetic.hpp).
  const float scale = static_cast<float>(ranks_) / static_cast<float>(n_);
  const auto& saved = buf_->slots[static_cast<std::size_t>(slot_)];
  const Matrix y = saved.y;
  const Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace> t = saved.t;
  Kokkos::parallel_for(
      "dmuon::residual", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {b, shape_.rows}),
      KOKKOS_LAMBDA(const std::int64_t s, const std::int64_t r) {
        y(s, r) = (y(s, r) - t(s, r)) * scale;
      });
  Kokkos::fence();
  const auto ub = static_cast<std::size_t>(b);
  const auto in = static_cast<std::size_t>(shape_.cols),
             out = static_cast<std::size_t>(shape_.rows);
  kernels::host::linear_backward_input(y.data(), w, buf_->dx.data(), ub, in, out);
  if (between) between();
  kernels::host::linear_backward_weight(y.data(), saved.x.data(), grad, ub, in, out, accumulate);
}

}  // namespace dmuon::engine
