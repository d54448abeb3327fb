#pragma once
// The cases of the GPU check (dmuon_device_engine_check), shared with its host emulation
// (gpu_step_emulation_test): each a topology, a method, the run's dtypes and step features at
// one rank, and the host reference file it is checked against.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::device_check {

struct Case {
  std::string topology;
  engine::Method method;
  kernels::Dtype wire;
  bool fp32_ns;     ///< Newton–Schulz in fp32 instead of --ns-dtype
  double clip = 0;  ///< --clip-norm (0: off)
  engine::ClipNormType clip_type = engine::ClipNormType::two;
  int accum = 1;      ///< --accum
  std::string route;  ///< one --route RULE=ROUTE:DTYPE ("" none)
  /// --seq-len with --micro-batch 2 and --ac full: the step's activation work runs on the GPU
  /// too (it feeds no gradient: the reference is the case without it); 0 = none.
  std::int64_t seq_len = 0;
};

/// A case with the step features it names (the others off).
Case make_case(std::string topology, engine::Method method, kernels::Dtype wire, bool fp32_ns,
               double clip = 0, engine::ClipNormType clip_type = engine::ClipNormType::two,
               int accum = 1, std::string route = "");

/// Every case, in the order the check runs them.
std::vector<Case> cases();

/// A case's topology and its one-rank plan (with its --route).
struct Loaded {
  model::Topology topo;
  plan::Plan plan;
};
Loaded load(const Case& c);

/// The engine options of a case on the GPU (--device cuda, one rank, --check), Newton–Schulz
/// in `ns_dtype` unless the case runs it in fp32.
engine::EngineOptions options(const Case& c, const Loaded& l, kernels::Dtype ns_dtype, int steps);

/// "", "clip0.5-2", "accum3", "clip0.5-2-accum3": what a case adds to the step, for its
/// reference file's name.
std::string variant(const Case& c);

/// The row label: method, variant and route.
std::string label(const Case& c);

/// The case whose host run is this case's reference: its method's optimizer (Muon methods
/// share one, AdamW has its own) with its clipping and accumulation, in fp32 on the host. Route
/// dtypes change the wire, not the one-process arithmetic, so cases that differ only in them
/// share a reference file (its header refuses one whose routes change an optimizer).
Case reference_case(const Case& c);

/// DIR/<topology>-<muon|adamw>[-<variant>].ref
std::string reference_path(const std::string& dir, const Case& c);

}  // namespace dmuon::device_check
