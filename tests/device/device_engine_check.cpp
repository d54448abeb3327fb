// dmuon_device_engine_check: the CUDA engine (--device cuda) at one rank, every method, with
// --check against the host's one-process reference, for the GPU check (scripts/device_check.sh).
// The GPU machine has no Kokkos or BLAS to recompute the reference, so the host writes it
// first and the check reads it (reference_file.hpp):
//
//   here:      dmuon_device_engine_check --write-references DIR    (a build with the host path)
//   on a GPU:  dmuon_device_engine_check --references DIR          (any build with CUDA + NCCL)
//
// Cases: topologies moe, vla, llm (tiny presets) × methods dmuon, fsdp-adamw, fsdp-muon,
// ddp-muon, ddp-dmuon, each with everything in fp32 (the data movement and indexing, held to 1e-4
// like the host) and with Newton–Schulz in --ns-dtype (default fp16, the reference's: what that
// costs in accuracy), and for dmuon and fsdp-adamw a bf16 wire too; dmuon and fsdp-adamw
// also (on llm) with --clip-norm (2-norm and inf-norm, a bound every step clips at) and
// --accum 3, in fp32 against their own host references. Prints one row per case (step
// time, phases, audit, check) and exits 0 when every case's audit and check passed, 3 when one
// failed, 2 on bad input, 77 when there is no GPU.

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "common/plan_options.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/grad_clip.hpp"
#include "dmuon/engine/reference.hpp"
#include "dmuon/engine/reference_file.hpp"
#include "dmuon/engine/synthetic.hpp"
#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"
#ifndef DMUON_DEVICE_STANDALONE
#include "kernels/scoped_kokkos.hpp"
#endif

namespace {

using namespace dmuon;

struct Case {
  std::string topology;
  engine::Method method;
  kernels::Dtype wire;
  bool fp32_ns;     ///< Newton–Schulz in fp32 instead of --ns-dtype
  double clip = 0;  ///< --clip-norm (0: off)
  engine::ClipNormType clip_type = engine::ClipNormType::two;
  int accum = 1;  ///< --accum
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* t : {"moe", "vla", "llm"})
    for (auto m : {engine::Method::dmuon, engine::Method::fsdp_adamw, engine::Method::fsdp_muon,
                   engine::Method::ddp_muon, engine::Method::ddp_dmuon}) {
      out.push_back({t, m, kernels::Dtype::f32, true});
      if (m != engine::Method::fsdp_adamw) out.push_back({t, m, kernels::Dtype::f32, false});
      if (m == engine::Method::dmuon || m == engine::Method::fsdp_adamw)
        out.push_back({t, m, kernels::Dtype::bf16, false});
    }
  // Clipping and accumulation on the GPU (fp32: the reduction order is the only difference),
  // on llm (its references are the smallest: .device travels within 64 MiB). The bounds are
  // far below the synthetic gradients' norms, so every step clips.
  using engine::ClipNormType;
  const auto dm = engine::Method::dmuon, aw = engine::Method::fsdp_adamw;
  const auto f32 = kernels::Dtype::f32;
  out.push_back({"llm", dm, f32, true, 0.5, ClipNormType::two, 1});
  out.push_back({"llm", dm, f32, true, 0.01, ClipNormType::inf, 1});
  out.push_back({"llm", dm, f32, true, 0, ClipNormType::two, 3});
  out.push_back({"llm", aw, f32, true, 0.5, ClipNormType::two, 1});
  out.push_back({"llm", aw, f32, true, 0, ClipNormType::two, 3});
  return out;
}

struct Loaded {
  model::Topology topo;
  plan::Plan plan;
};

Loaded load(const std::string& topology) {
  apps::PlanOptions po;
  po.topology = topology;
  Loaded l{apps::load_topology(po), {}};
  l.plan = plan::make_plan(l.topo.tree, apps::make_plan_config(po, l.topo, 1));
  return l;
}

// Samples enough for full-rank gradients (synthetic.hpp): the 16-bit Newton–Schulz is then
// compared where rounding is not amplified through near-null directions.
std::int64_t global_tokens(const Loaded& l) {
  const auto& site_of = l.plan.hooks.site_of_param;
  return std::max<std::int64_t>(64, engine::full_rank_global_tokens(l.topo.tree, [&](int pid) {
                                  return site_of[static_cast<std::size_t>(pid)] >= 0;
                                }));
}

engine::EngineOptions options(const Case& c, const Loaded& l, const std::string& ns_dtype,
                              int steps) {
  engine::EngineOptions o;
  o.step.method = c.method;
  o.backend.device = engine::Device::cuda;
  o.step.wire = c.wire;
  o.backend.ns_dtype =
      c.fp32_ns ? kernels::Dtype::f32 : engine::parse_dtype(ns_dtype, "--ns-dtype", true);
  o.step.global_tokens = global_tokens(l);
  o.run.steps = steps;
  o.run.warmup = 1;
  o.run.seed = 7;
  o.run.check = true;
  o.step.clip_norm = c.clip;
  o.step.clip_norm_type = c.clip_type;
  o.step.accum = c.accum;
  return o;
}

// "", "clip0.5-2", "accum3": what a case adds to the step, for its reference and its row.
std::string variant(const Case& c) {
  std::string v;
  if (c.clip > 0) v += fmt::format("clip{}-{}", c.clip, engine::clip_norm_type_name(c.clip_type));
  if (c.accum > 1) v += fmt::format("{}accum{}", v.empty() ? "" : "-", c.accum);
  return v;
}

// Muon methods share a reference (the same optimizer on every parameter), AdamW has its own;
// clipping and accumulation change the step, so each variant has its own too.
std::string reference_path(const std::string& dir, const Case& c) {
  const std::string v = variant(c);
  return fmt::format("{}/{}-{}{}{}.ref", dir, c.topology,
                     c.method == engine::Method::fsdp_adamw ? "adamw" : "muon",
                     v.empty() ? "" : "-", v);
}

int write_references(const std::string& dir, int steps) {
#ifndef DMUON_DEVICE_STANDALONE
  const kernels::host::ScopedKokkos kokkos;  // the host reference runs the host kernels
#endif
  std::vector<std::string> written;
  for (Case c : cases()) {
    // The reference of a case is its method's optimizer in fp32, on the host, at one rank.
    c.method = c.method == engine::Method::fsdp_adamw ? c.method : engine::Method::dmuon;
    c.wire = kernels::Dtype::f32;
    c.fp32_ns = true;
    const std::string path = reference_path(dir, c);
    if (std::find(written.begin(), written.end(), path) != written.end()) continue;
    const Loaded l = load(c.topology);
    const auto o = options(c, l, "fp16", steps);
    engine::write_reference(path, engine::reference_header(l.topo.tree, l.plan, o, 1),
                            engine::reference_weights(l.topo.tree, l.plan, o, 1));
    fmt::print("# wrote {}\n", path);
    written.push_back(path);
  }
  return apps::kOk;
}

int check_on_device(const std::string& dir, const std::string& ns_dtype, int steps) {
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
      "# dmuon_device_engine_check: one rank, --device cuda, Newton-Schulz gram in {}, "
      "{} steps (+1 warmup), global batch: full-rank gradients (at least 64 samples)\n",
      ns_dtype, steps);
  fmt::print("# {:<5} {:<24} {:<5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>9}  {}\n", "topo",
             "method", "wire", "step_ms", "fwd_ms", "bwd_ms", "ns_ms", "other_ms", "exposed",
             "rel_err", "tol", "result");
  int failed = 0;
  for (const Case& c : cases()) {
    const Loaded l = load(c.topology);
    auto o = options(c, l, ns_dtype, steps);
    const std::string path = reference_path(dir, c);
    const std::string header = engine::reference_header(l.topo.tree, l.plan, o, 1);
    const model::ModuleTree& tree = l.topo.tree;
    o.run.check_reference = [&] { return engine::read_reference(path, header, tree); };
    const auto r = engine::run_engine(tree, l.plan, o, MPI_COMM_WORLD);
    const auto ms = [&r](engine::Phase p) { return r.phases_ms[static_cast<std::size_t>(p)]; };
    const bool ok = r.audit_ok && r.checked && r.check_passed;
    failed += ok ? 0 : 1;
    fmt::print(
        "  {:<5} {:<24} {:<5} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.3f} {:>10.3e} "
        "{:>9.1e}  {}{}\n",
        c.topology,
        variant(c).empty() ? std::string(engine::method_name(c.method))
                           : fmt::format("{} {}", engine::method_name(c.method), variant(c)),
        engine::dtype_flag_name(c.wire), ms(engine::Phase::step),
        ms(engine::Phase::forward_compute) + ms(engine::Phase::forward_comm),
        ms(engine::Phase::backward_compute) + ms(engine::Phase::backward_comm),
        ms(engine::Phase::optimizer_ns), ms(engine::Phase::optimizer_other),
        ms(engine::Phase::exposed_comm), r.max_rel_error, r.check_tolerance, ok ? "OK" : "FAILED",
        r.audit_ok ? (r.check_passed ? "" : " (worst " + r.worst_param + ")")
                   : " (audit: " + r.audit_message + ")");
  }
  fmt::print("# {} of {} cases passed: {}\n", cases().size() - static_cast<std::size_t>(failed),
             cases().size(), failed == 0 ? "OK" : "FAILED");
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
