#include "dmuon/project/compute_contention.hpp"

#include <algorithm>
#include <stdexcept>

namespace dmuon::project {

int reference_held_sms(const Machine& m) {
  if (m.device != DeviceKind::gpu || m.compute.sm_count <= 0) return 0;
  return std::max(m.intra.collective_sms, m.inter.collective_sms);
}

Machine with_sms_held(const Machine& m, int held) {
  const int sms = m.compute.sm_count;
  if (held <= 0 || held >= sms)
    throw std::logic_error("with_sms_held: held SMs must be in 1..sm_count-1");
  Machine c = m;
  const double left = static_cast<double>(sms - held) / static_cast<double>(sms);
  c.compute.sm_count = sms - held;
  for (double& p : c.compute.peak_tflops) p *= left;
  c.compute.fp8_peak_tflops *= left;
  return c;
}

double sm_seconds(double alone, double held_ref, int sms, int ref) {
  if (ref <= 0 || held_ref <= alone) return 0;
  return (held_ref - alone) * static_cast<double>(sms - ref) / static_cast<double>(ref);
}

}  // namespace dmuon::project
