#include "dmuon/work/throughput.hpp"

#include <fmt/format.h>

#include <cmath>

#include "dmuon/base/error.hpp"

namespace dmuon::work {

double model_tflops_per_gpu(double flops_per_token, double tokens_per_s_per_gpu) {
  return flops_per_token * tokens_per_s_per_gpu / 1e12;
}

double mfu(double flops_per_token, double tokens_per_s_per_gpu, double peak) {
  if (!(peak > 0) || !std::isfinite(peak))
    throw InputError(fmt::format("peak {} FLOP/s is invalid for MFU (must be > 0)", peak));
  return flops_per_token * tokens_per_s_per_gpu / peak;
}

double hardware_flops_per_token(const StepWork& w) {
  const double flops = w.totals(Phase::forward).flops + w.totals(Phase::backward).flops +
                       w.totals(Phase::recompute).flops;
  // Under TP the work is one TP rank's and each of the T ranks runs it on the same tokens.
  return w.text_tokens > 0 ? flops * w.shape.tp.size / w.text_tokens : 0.0;
}

double hfu(const StepWork& w, double tokens_per_s_per_gpu, double peak) {
  return mfu(hardware_flops_per_token(w), tokens_per_s_per_gpu, peak);
}

}  // namespace dmuon::work
