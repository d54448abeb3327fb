#pragma once
// Where one rank's step work spends its device time, op by op: every op of the step work's
// units (forward, recompute and backward of one micro-batch) priced alone by OpTime and summed
// by name, slowest first. An isolated sum, not the replay: no overlap, no compute slowed by
// running collectives, no collectives (the TP, CP and EP activation collectives are counted
// apart); the parameters' GEMMs are listed as the step work states them, which the engine and
// the projection run as each parameter's synthetic Linear (docs/STEP-WORK.md, top).

#include <string>
#include <vector>

#include "dmuon/project/op_time.hpp"
#include "dmuon/work/step_work.hpp"

namespace dmuon::project {

struct OpTotal {
  std::string name;             ///< the op's name ("linear.dgrad", "rms_norm", "attention", ...)
  bool parameter_gemm = false;  ///< a parameter's linear or a grouped expert GEMM
  double seconds = 0;           ///< per rank and micro-batch
  double bytes = 0;             ///< read and written
  double flops = 0;             ///< matmul FLOPs
  int kernels = 0;
};

/// The step work's device ops summed by (name, parameter GEMM), slowest first (then by name).
std::vector<OpTotal> op_totals(const work::StepWork& work, const OpTime& time);

}  // namespace dmuon::project
