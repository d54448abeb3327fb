// dmuon_device_engine_check: the CUDA engine (--device cuda) at one rank, every method, with
// --check against the host's one-process reference, for the GPU check (scripts/device_check.sh).
// The GPU machine has no Kokkos or BLAS to recompute the reference, so the host writes it
// first and the check reads it (reference_file.hpp):
//
//   here:      dmuon_device_engine_check --write-references DIR    (a build with the host path)
//   on a GPU:  dmuon_device_engine_check --references DIR          (any build with CUDA + NCCL)
//
// Cases (device_cases.cpp): topologies moe, vla, llm (tiny presets) × methods dmuon,
// fsdp-adamw, fsdp-muon, ddp-muon, ddp-dmuon, each with everything in fp32 (the data movement
// and indexing, held to 1e-4 like the host) and with Newton–Schulz in --ns-dtype (default fp16,
// the reference's; what runs per matrix is cuda::ns_numerics' rule), and for dmuon and
// fsdp-adamw a bf16 wire too; on llm also --clip-norm (2-norm and inf-norm, a bound every step
// clips at) and --accum 3 for every method, and --route dtypes (Muon matrices, norms) in every
// arena that holds them. Each is checked at the engine's tolerance for its dtypes against its
// own host reference; gpu_step_emulation_test emulates every case on the host in CI. Prints one
// row per case (step time, phases, audit, check) and exits 0 when every case's audit and check
// passed, 3 when one failed, 2 on bad input, 77 when there is no GPU. Last, one case runs with
// --trace (CUDA events in stream order, engine/exec/step_trace.hpp) and its timeline is checked:
// every step present, spans non-negative and never overlapping on one track, batches with bytes.

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/run_main.hpp"
#include "device_cases.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/base/trace.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/engine/verify/reference_file.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"
#ifndef DMUON_DEVICE_STANDALONE
#include "kernels/scoped_kokkos.hpp"
#endif

namespace {

using namespace dmuon;
using namespace dmuon::device_check;

int write_references(const std::string& dir, int steps) {
#ifndef DMUON_DEVICE_STANDALONE
  const kernels::host::ScopedKokkos kokkos;  // the host reference runs the host kernels
#endif
  std::vector<std::string> written;
  for (const Case& c : cases()) {
    const Case ref = reference_case(c);
    const std::string path = reference_path(dir, ref);
    if (std::find(written.begin(), written.end(), path) != written.end()) continue;
    const Loaded l = load(ref);
    const auto o = options(ref, l, kernels::Dtype::f16, steps);
    engine::AdamwEpsRegime regime;  // what an fp32 check against this file excuses
    const auto weights = engine::reference_weights(l.topo.tree, l.plan, o, 1, &regime);
    engine::write_reference(path, engine::reference_header(l.topo.tree, l.plan, o, 1), weights,
                            &regime);
    fmt::print("# wrote {}\n", path);
    written.push_back(path);
  }
  return apps::kOk;
}

// What a CUDA --trace must hold (see the header); "" when it does.
std::string trace_problem(const std::string& spans_json, int steps) {
  Trace trace({0}, 1, "measured");
  trace.add_spans_json(spans_json);
  std::map<std::tuple<int, int, int>, std::vector<std::pair<double, double>>> on_track;
  std::vector<int> compute_per_step(static_cast<std::size_t>(steps), 0);
  std::vector<int> batches_per_step(static_cast<std::size_t>(steps), 0);
  for (const auto& s : trace.spans()) {
    if (s.step < 0 || s.step >= steps) return fmt::format("span '{}' in step {}", s.name, s.step);
    if (!(s.start_s >= 0) || !(s.duration_s >= 0))
      return fmt::format("span '{}' starts at {} s and lasts {} s", s.name, s.start_s,
                         s.duration_s);
    if (s.track == TraceTrack::compute) ++compute_per_step[static_cast<std::size_t>(s.step)];
    if (s.track >= TraceTrack::weights) {
      ++batches_per_step[static_cast<std::size_t>(s.step)];
      if (s.payload_bytes <= 0 || s.calls < 1)
        return fmt::format("batch '{}' carries {} bytes in {} calls", s.name, s.payload_bytes,
                           s.calls);
    }
    on_track[{s.step, static_cast<int>(s.track), s.lane}].emplace_back(s.start_s,
                                                                       s.start_s + s.duration_s);
  }
  for (int st = 0; st < steps; ++st) {
    const auto i = static_cast<std::size_t>(st);
    if (compute_per_step[i] == 0 || batches_per_step[i] != batches_per_step[0])
      return fmt::format("step {}: {} compute spans, {} batches (step 0: {})", st,
                         compute_per_step[i], batches_per_step[i], batches_per_step[0]);
  }
  for (auto& [key, spans] : on_track) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k)
      if (spans[k].first < spans[k - 1].second - 1e-9)
        return fmt::format("track {} lane {} of step {}: spans overlap at {} s",
                           trace_track_name(static_cast<TraceTrack>(std::get<1>(key))),
                           std::get<2>(key), std::get<0>(key), spans[k].first);
  }
  return "";
}

// A case's GPU options, its --check read from the host's reference file in dir (this build
// cannot compute the one-process reference itself: no Kokkos or BLAS on the GPU machine).
engine::EngineOptions checked_options(const std::string& dir, const Case& c, const Loaded& l,
                                      kernels::Dtype ns_dtype, int steps) {
  auto o = options(c, l, ns_dtype, steps);
  const std::string path = reference_path(dir, reference_case(c));
  const std::string header = engine::reference_header(l.topo.tree, l.plan, o, 1);
  const model::ModuleTree* tree = &l.topo.tree;
  o.run.check_reference = [path, header, tree] {
    return engine::read_reference_check(path, header, *tree);
  };
  return o;
}

// A case passes when its bytes audit and its --check against the reference file both hold.
bool passed(const engine::RunResult& r) {
  return r.audit_ok && r.checked && r.check_passed;
}

int check_on_device(const std::string& dir, const std::string& ns_name, int steps) {
  try {
    if (kernels::cuda::device_count() < 1) {
      fmt::print(stderr, "dmuon_device_engine_check: no GPU visible\n");
      return 77;
    }
  } catch (const kernels::KernelError& e) {
    fmt::print(stderr, "dmuon_device_engine_check: no GPU: {}\n", e.what());
    return 77;
  }
  fmt::print(
      "# dmuon_device_engine_check: one rank, --device cuda, Newton-Schulz (--ns gram) in {}, "
      "{} steps (+1 warmup), global batch: full-rank gradients (at least 64 samples)\n",
      ns_name, steps);
  fmt::print("# {:<5} {:<52} {:<5} {:<5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>9}  {}\n",
             "topo", "case", "wire", "ns", "step_ms", "fwd_ms", "bwd_ms", "ns_ms", "other_ms",
             "exposed", "rel_err", "tol", "result");
  const kernels::Dtype ns_dtype = engine::parse_dtype(ns_name, "--ns-dtype", true);
  int failed = 0;
  const std::vector<Case> all = cases();  // built once: the loop, the count and the trace case
  for (const Case& c : all) {
    const Loaded l = load(c);
    const auto o = checked_options(dir, c, l, ns_dtype, steps);
    engine::RunResult r;
    try {
      r = engine::run_engine(l.topo.tree, l.plan, o, MPI_COMM_WORLD);
    } catch (const std::exception& e) {  // one case's error must not hide the others' results
      ++failed;
      fmt::print("  {:<5} {:<52} {:<5} {:<5} FAILED (error: {})\n", c.topology, label(c),
                 engine::dtype_flag_name(c.wire), engine::dtype_flag_name(o.backend.ns_dtype),
                 e.what());
      continue;
    }
    const auto ms = [&r](engine::Phase p) { return r.phases_ms[static_cast<std::size_t>(p)]; };
    const bool ok = passed(r);
    failed += ok ? 0 : 1;
    fmt::print(
        "  {:<5} {:<52} {:<5} {:<5} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.3f} "
        "{:>10.3e} {:>9.1e}  {}{}\n",
        c.topology, label(c), engine::dtype_flag_name(c.wire),
        engine::dtype_flag_name(o.backend.ns_dtype), ms(engine::Phase::step),
        ms(engine::Phase::forward_compute) + ms(engine::Phase::forward_comm),
        ms(engine::Phase::backward_compute) + ms(engine::Phase::backward_comm),
        ms(engine::Phase::optimizer_ns), ms(engine::Phase::optimizer_other),
        ms(engine::Phase::exposed_comm), r.max_rel_error, r.check_tolerance, ok ? "OK" : "FAILED",
        r.audit_ok ? (r.check_passed ? "" : " (worst " + r.worst_param + ")")
                   : " (audit: " + r.audit_message + ")");
  }
  fmt::print("# {} of {} cases passed: {}\n", all.size() - static_cast<std::size_t>(failed),
             all.size(), failed == 0 ? "OK" : "FAILED");
  {
    const Case& c = all.front();
    const Loaded l = load(c);
    auto o = checked_options(dir, c, l, ns_dtype, steps);
    o.run.trace = true;
    std::string problem;
    try {
      const auto r = engine::run_engine(l.topo.tree, l.plan, o, MPI_COMM_WORLD);
      problem = trace_problem(r.trace_spans, static_cast<int>(o.run.total_steps()));
      if (problem.empty() && !passed(r))
        problem = "the traced run failed its audit or --check";  // tracing changed the step
    } catch (const std::exception& e) {
      problem = e.what();
    }
    fmt::print("# --trace on the GPU ({} {}): {}\n", c.topology, label(c),
               problem.empty() ? "OK" : "FAILED: " + problem);
    failed += problem.empty() ? 0 : 1;
  }
  return failed == 0 ? apps::kOk : apps::kCheckFailed;
}

int run(int argc, char** argv) {
  CLI::App app{"dmuon_device_engine_check: the CUDA engine at one rank against host references"};
  std::string write_dir, read_dir, ns_dtype = "fp16";
  int steps = 2;
  auto* w = app.add_option("--write-references", write_dir,
                           "compute the host one-process references into this directory");
  auto* r = app.add_option("--references", read_dir,
                           "run every case on the GPU and check against this directory's files");
  w->excludes(r);
  app.add_option("--ns-dtype", ns_dtype, "fp16 | bf16 | fp32")->capture_default_str();
  app.add_option("--steps", steps, "measured steps per case")->capture_default_str();
  if (!apps::parse_cli(app, argc, argv)) return apps::kOk;
  if (steps < 1) throw InputError(fmt::format("--steps {} is invalid (must be >= 1)", steps));
  (void)engine::parse_dtype(ns_dtype, "--ns-dtype", true);
  if (!write_dir.empty()) return write_references(write_dir, steps);
  if (read_dir.empty()) throw InputError("give --write-references DIR or --references DIR");
  return check_on_device(read_dir, ns_dtype, steps);
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_device_engine_check", argc, argv,
                                   [&] { return run(argc, argv); });
}
