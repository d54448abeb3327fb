#include "bench/bench_options.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/run_main.hpp"
#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/accumulation.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/comm_volume.hpp"

namespace dmuon::apps::bench {

namespace {

// What a bench sweeps: boundaries, owner strategies, methods. It replaces the shared
// single-valued --boundary/--lenient/--owner-strategy of the plan options.
void add_sweep_options(CLI::App& app, BenchOptions& o) {
  app.remove_option(app.get_option("--boundary"));
  app.remove_option(app.get_option("--lenient"));
  app.remove_option(app.get_option("--owner-strategy"));
  app.add_option("--owner-strategy", o.owner_strategies,
                 "lpt | round_robin | rank0 | lpt_refine (repeatable or comma list; default lpt): "
                 "dmuon runs once per boundary and strategy");
  app.add_option("--boundary", o.boundaries,
                 "hook boundary, repeatable (replaces the default sweep): default | recommended "
                 "| incomplete | types:T1,T2 | paths:REGEX | resolver:PARAM_REGEX=PATH;... "
                 "(prefix strict: or lenient: to fix one item's mode). Without it: the "
                 "topology's sweep (configs/<topology>.yaml, else default, recommended, "
                 "incomplete strict, incomplete lenient)");
  app.add_flag("--lenient", o.lenient,
               "lenient mode for --boundary items without a strict:/lenient: prefix");
  app.add_option("--method", o.methods,
                 "dmuon|fsdp-adamw|fsdp-muon|ddp-muon|ddp-dmuon (repeatable or comma list; "
                 "default dmuon,fsdp-adamw,fsdp-muon; with --tp > 1 dmuon, the baselines have no "
                 "TP step); baselines run once, dmuon and ddp-dmuon once per boundary");
}

// How a step communicates and updates: resharding, gradient reduction, prefetch, device, wire
// type, Newton–Schulz, optimizer pipeline, compute, clipping, accumulation.
void add_schedule_options(CLI::App& app, BenchOptions& o) {
  app.add_option("--reshard", o.reshard, "z3 (re-broadcast before backward) or z2")
      ->capture_default_str();
  app.add_option("--grad-reduce", o.grad_reduce,
                 "dmuon gradients to owners: per-param (one reduce per parameter, the reference) "
                 "or packed (one per site and owner: same bytes, fewer messages)")
      ->capture_default_str();
  app.add_option("--prefetch", o.engine.step.prefetch,
                 "weight broadcasts/all-gathers kept in flight ahead of compute, in groups "
                 "(0 = none; 1 is the reference's)")
      ->capture_default_str();
  app.add_option("--device", o.device,
                 "host (Open MPI + Kokkos) or cuda (NCCL + cuBLAS, one GPU per rank)")
      ->capture_default_str();
  app.add_option("--comm-dtype", o.comm_dtype,
                 "fp32 or bf16: parameters and gradients on the wire (and the weights compute "
                 "reads); masters and optimizer state stay fp32")
      ->capture_default_str();
  app.add_option_function<std::string>(
      "--reduce-dtype",
      [&o](const std::string& v) {
        o.reduce_dtype = v;
        o.reduce_dtype_given = true;
      },
      "fp32 or bf16: gradients on the wire (every reduce, reduce-scatter, all-reduce and HSDP "
      "stage 2, and the gradient buffers); default: --comm-dtype. torchtitan's FSDP2 default "
      "is --comm-dtype bf16 --reduce-dtype fp32");
  app.add_option("--ns", o.ns,
                 "Newton-Schulz form: gram (Gram iteration with restart, the reference's) or "
                 "direct")
      ->capture_default_str();
  app.add_option("--ns-dtype", o.ns_dtype,
                 "--device cuda: the type Newton-Schulz reads and writes, fp16 (the "
                 "reference's), bf16 or fp32 (fp32 norm always; per-shape numerics: "
                 "docs/KERNELS.md); the host computes in fp32")
      ->capture_default_str();
  app.add_option("--optimizer-pipeline", o.optimizer_pipeline,
                 "per-group (wait, prepare, NS, apply and publish group by group in forward "
                 "order, the reference's) or all-then-publish (every NS, then every update, then "
                 "every HSDP replicate broadcast)")
      ->capture_default_str();
  app.add_option("--compute", o.compute, "gemm (synthetic per-Linear GEMMs) or none")
      ->capture_default_str();
  app.add_option_function<std::string>(
      "--clip-norm",
      [&o](const std::string& v) {
        o.clip_norm = v;
        o.clip_norm_given = true;
      },
      "clip the global gradient norm to this value (> 0) before the optimizer, as "
      "torch.nn.utils.clip_grad_norm_: one world all-reduce of one fp32 per step (default: off)");
  app.add_option("--clip-norm-type", o.clip_norm_type,
                 "the norm --clip-norm bounds: 2 (default) or inf");
  app.add_option_function<std::string>(
      "--accum",
      [&o](const std::string& v) {
        o.accum = v;
        o.accum_given = true;
      },
      "gradient accumulation: split each step's global batch into this many micro-batches "
      "(forward + backward each, weights re-gathered each time; gradients reduced after the "
      "last one only); --tokens/--global-tokens stay per step (default 1)");
}

// The activation work of a real step (--seq-len) and how it is counted and run.
void add_workload_options(CLI::App& app, BenchOptions& o) {
  app.add_option("--seq-len", o.seq_len,
                 "tokens per sample: with --micro-batch, tokens per rank = seq-len x "
                 "micro-batch (instead of --tokens), and the step runs the model's activation "
                 "work (attention, norms, activations, loss, routing: docs/STEP-WORK.md)")
      ->transform(integer_text<std::int64_t>());
  app.add_option("--micro-batch", o.micro_batch, "samples per rank (with --seq-len)")
      ->transform(integer_text<std::int64_t>());
  app.add_option("--ac", o.ac,
                 "activation checkpointing: none, selective (torchtitan's op policy), "
                 "selective-layer, full (recompute each block's forward) or core-attn")
      ->capture_default_str();
  app.add_option("--compute-dtype", o.compute_dtype,
                 "the type activations and GEMMs compute in: bf16, fp16 or fp32 (default: the "
                 "device's; a projected GPU bf16, the host fp32, the CUDA backend the wire type)");
  app.add_option("--flops", o.flops,
                 "FLOP convention of the reported model TFLOP/s and MFU: 6n, 6n-attn "
                 "(torchtitan's), megatron, megatron-causal")
      ->capture_default_str();
  app.add_option("--fusion", o.fusion,
                 "how the activation work's elementwise ops run: fused (torch.compile, fused "
                 "kernels) or eager (PyTorch eager: one kernel per op, docs/STEP-WORK.md)")
      ->capture_default_str();
}

// Batch size, steps, repeats, seed and --check.
void add_run_options(CLI::App& app, BenchOptions& o) {
  auto& eo = o.engine;
  eo.run.steps = kDefaultSteps;
  eo.run.warmup = kDefaultWarmup;
  eo.step.tokens = kDefaultTokens;
  app.add_option("--tokens", eo.step.tokens, "samples per rank (global batch = tokens x ranks)")
      ->capture_default_str()
      ->transform(integer_text<std::int64_t>());
  app.add_option("--global-tokens", eo.step.global_tokens,
                 "global batch in samples, split over ranks (overrides --tokens; keeps --check "
                 "comparable across rank counts)")
      ->transform(integer_text<std::int64_t>());
  app.add_option("--steps", eo.run.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", eo.run.warmup, "unmeasured steps first (in every repeat)")
      ->capture_default_str();
  app.add_option("--repeats", o.repeats,
                 "run every row this many times (each after its warm-up); the table and the "
                 "results file keep every measured step of every repeat as one sample, for "
                 "spreads and dmuon_compare's significance test")
      ->capture_default_str();
  app.add_option("--seed", eo.run.seed,
                 "seed of the synthetic weights and data (an integer 0..2^64-1)")
      ->capture_default_str()
      ->transform(integer_text<std::uint64_t>());
  app.add_flag("--check", eo.run.check,
               "compare final weights with a one-process recomputation on rank 0");
  app.add_option("--check-tolerance", eo.run.check_tolerance,
                 "max relative error for --check (default: 1e-4 when everything is fp32, 8 unit "
                 "roundoffs of the coarsest 16-bit type on the wire or in the device's "
                 "Newton-Schulz)");
}

void add_output_options(CLI::App& app, BenchOptions& o) {
  app.add_flag("--json", o.json, "print one JSON object on rank 0 instead of the table");
  app.add_flag("--wide", o.wide,
               "table: show long boundary specs and errors in full instead of fitting 160 "
               "columns");
  app.add_option("--output", o.output,
                 "results file (HDF5, written atomically by rank 0; default: none)");
  app.add_option("--trace", o.trace,
                 "write the run's timeline as Chrome trace-event JSON (Perfetto, "
                 "chrome://tracing): per rank the phases, compute ops and waits, each stream's "
                 "collectives with their bytes; one run only (one boundary, method, owner "
                 "strategy)")
      ->each([&o](const std::string&) { o.trace_given = true; });
}

void add_test_aids(CLI::App& app, BenchOptions& o) {
  app.add_option("--inject-nan-step", o.engine.run.inject_nan_step,
                 "test aid: poison one gradient on the last rank at this step (1-based); every "
                 "rank must end after that step with exit 3 naming the parameter");
}

}  // namespace

// The groups in the order --help lists their flags.
void add_bench_options(CLI::App& app, BenchOptions& o) {
  add_plan_options(app, o.plan);
  add_sweep_options(app, o);
  add_schedule_options(app, o);
  add_workload_options(app, o);
  add_run_options(app, o);
  add_output_options(app, o);
  add_test_aids(app, o);
}

namespace {

// --seq-len / --micro-batch (tokens per rank), --ac, --compute-dtype, --flops.
void resolve_step_shape(BenchOptions& o) {
  if ((o.seq_len != 0) != (o.micro_batch != 0))
    throw InputError("--seq-len and --micro-batch go together (tokens per rank = their product)");
  if (o.seq_len < 0 || o.micro_batch < 0 || o.seq_len > (1 << 24) || o.micro_batch > (1 << 16))
    throw InputError(
        fmt::format("--seq-len {} / --micro-batch {} are invalid (valid: 1..16777216 and 1..65536)",
                    o.seq_len, o.micro_batch));
  if (o.seq_len > 0) {
    if (o.engine.step.global_tokens > 0)
      throw InputError("--seq-len/--micro-batch and --global-tokens both set the batch: give one");
    o.engine.step.tokens = o.seq_len * o.micro_batch;
  }
  o.ac_resolved = work::parse_ac_policy(o.ac);
  if (o.ac_resolved != work::AcPolicy::none && o.seq_len <= 0)
    throw InputError(
        fmt::format("--ac {} needs --seq-len (the activation work it recomputes)", o.ac));
  o.engine.step.compute_dtype.reset();
  if (!o.compute_dtype.empty())
    o.engine.step.compute_dtype = engine::parse_dtype(o.compute_dtype, "--compute-dtype", true);
  o.flops_resolved = work::parse_flop_convention(o.flops);
  o.fusion_resolved = work::parse_fusion(o.fusion);
}

}  // namespace

std::vector<engine::Method> resolve_engine_options(BenchOptions& o) {
  if (o.repeats < 1 || o.repeats > 1000)
    throw InputError(fmt::format("--repeats {} is invalid (valid: 1 to 1000)", o.repeats));
  if (o.trace_given && o.trace.empty())
    throw InputError("--trace '' is empty (valid: the path of the JSON file to write)");
  const auto methods = engine::parse_method_list(
      !o.methods.empty() ? o.methods
      : o.plan.tp > 1    ? std::vector<std::string>{"dmuon"}
                         : std::vector<std::string>{"dmuon,fsdp-adamw,fsdp-muon"});
  o.owner_strategies_resolved.clear();
  for (const auto& word : split_comma_lists(o.owner_strategies, "--owner-strategy")) {
    const std::string name = partition::strategy_name(partition::parse_strategy(word));
    auto& r = o.owner_strategies_resolved;
    if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
  }
  if (o.owner_strategies.empty()) o.owner_strategies_resolved = {"lpt"};
  if (o.owner_strategies_resolved.empty())
    throw InputError(
        "--owner-strategy names no strategy (valid: lpt, round_robin, rank0, "
        "lpt_refine)");
  o.plan.owner_strategy = o.owner_strategies_resolved.front();
  o.engine.step.reshard = plan::parse_reshard(o.reshard);
  o.plan.reshard = o.engine.step.reshard;  // Z2 sites differ for tied parameters (SPEC §3)
  o.engine.step.grad_reduce = plan::parse_grad_reduce(o.grad_reduce);
  o.engine.step.compute = engine::parse_compute(o.compute);
  o.engine.backend.device = engine::parse_device(o.device);
  o.engine.step.wire = engine::parse_dtype(o.comm_dtype, "--comm-dtype", false);
  if (o.reduce_dtype_given)
    o.engine.step.reduce = engine::parse_dtype(o.reduce_dtype, "--reduce-dtype", false);
  o.engine.backend.ns = engine::parse_ns_variant(o.ns);
  o.engine.backend.ns_dtype = engine::parse_dtype(o.ns_dtype, "--ns-dtype", true);
  o.engine.step.pipeline = engine::parse_optimizer_pipeline(o.optimizer_pipeline);
  o.engine.step.clip_norm = o.clip_norm_given ? engine::parse_clip_norm(o.clip_norm) : 0;
  if (!o.clip_norm_type.empty()) {
    o.engine.step.clip_norm_type = engine::parse_clip_norm_type(o.clip_norm_type);
    if (!o.clip_norm_given)
      throw InputError(
          fmt::format("--clip-norm-type {} needs --clip-norm (the threshold)", o.clip_norm_type));
  }
  o.engine.step.accum = o.accum_given ? engine::parse_accum(o.accum) : 1;
  resolve_step_shape(o);
  return methods;
}

void describe_options(const BenchOptions& o, const std::vector<engine::Method>& methods,
                      RunDescription& d) {
  // New flags belong here too unless only rank 0 reads them (a rank that differs would
  // otherwise run a different step and leave the others waiting in a collective).
  const auto& p = o.plan;
  const auto& s = o.engine.step;
  const auto& b = o.engine.backend;
  const auto& r = o.engine.run;
  const auto or_default = [](const std::string& v) { return v.empty() ? "(default)" : v; };
  std::vector<std::string> method_names;
  for (auto m : methods) method_names.emplace_back(engine::method_name(m));
  d.add("method", fmt::format("{}", fmt::join(method_names, ",")));
  d.add("owner_strategy", fmt::format("{}", fmt::join(o.owner_strategies_resolved, ",")));
  d.add("dedicate", p.dedicate.empty() ? "(the topology's)" : p.dedicate);
  d.add("route", p.routes.empty() ? "(none)" : fmt::format("{}", fmt::join(p.routes, " ")));
  d.add("cost_model", p.cost_model);
  d.add("pack_threshold", p.no_pack ? "off (no_pack)" : std::to_string(p.pack_threshold));
  d.add("max_owners_per_group", p.max_owners_per_group);
  d.add("group_key", p.group_key);
  d.add("column_balance", p.no_column_balance ? "off" : "on");
  d.add("replicate", p.replicate);
  d.add("tp", p.tp);
  d.add("tp_shard", or_default(p.tp_shard));
  d.add("tp_row", or_default(p.tp_row));
  d.add("reshard", plan::reshard_name(s.reshard));
  d.add("grad_reduce", plan::grad_reduce_name(s.grad_reduce));
  d.add("prefetch", s.prefetch);
  d.add("optimizer_pipeline", engine::optimizer_pipeline_name(s.pipeline));
  d.add("accum", s.accum);
  d.add("comm_dtype", engine::dtype_flag_name(s.wire));
  d.add("reduce_dtype", engine::dtype_flag_name(s.reduce_dtype()));
  d.add("clip_norm", s.clip() ? fmt::format("{}", s.clip_norm) : std::string("off"));
  d.add("clip_norm_type", engine::clip_norm_type_name(s.clip_norm_type));
  d.add("compute", engine::compute_name(s.compute));
  d.add("tokens", s.tokens);
  d.add("global_tokens", s.global_tokens);
  d.add("seq_len", o.seq_len);
  d.add("micro_batch", o.micro_batch);
  d.add("ac", work::ac_policy_name(o.ac_resolved));
  d.add("compute_dtype",
        s.compute_dtype ? engine::dtype_flag_name(*s.compute_dtype) : "(the device's)");
  d.add("fusion", work::fusion_name(o.fusion_resolved));
  d.add("stage2_lag", s.stage2_lag);
  d.add("device", engine::device_name(b.device));
  d.add("ns", kernels::to_string(b.ns));
  d.add("ns_dtype", b.device == engine::Device::cuda ? engine::dtype_flag_name(b.ns_dtype)
                                                     : "(unused on the host)");
  d.add("steps", r.steps);
  d.add("warmup", r.warmup);
  d.add("repeats", o.repeats);
  d.add("seed", r.seed);
  d.add("check", r.check ? "on" : "off");
  d.add("check_tolerance",
        r.check_tolerance > 0 ? fmt::format("{}", r.check_tolerance) : "(default)");
  d.add("keep_final_weights", r.keep_final_weights ? "on" : "off");
  d.add("inject_nan_step", r.inject_nan_step);
  d.add("output", o.output.empty() ? "none" : "a file");
  d.add("trace", o.trace.empty() ? "none" : "a file");
}

std::optional<work::StepWork> attach_step_work(BenchOptions& o, const model::Topology& topology,
                                               kernels::Dtype dtype) {
  if (o.seq_len <= 0) return std::nullopt;
  work::RunShape shape;
  shape.seq_len = o.seq_len;
  shape.micro_batch = o.micro_batch;
  shape.dtype = dtype;
  shape.ac = o.ac_resolved;
  shape.fusion = o.fusion_resolved;
  auto w = work::build_step_work(topology, shape);
  o.engine.step.activation = engine::activation_work(w);
  return w;
}

std::string step_work_lines(const BenchOptions& o, const work::StepWork& w) {
  std::string s =
      fmt::format("# step work: seq {} x micro-batch {} per rank, ac {}, fusion {}, compute {}",
                  o.seq_len, o.micro_batch, o.ac, o.fusion, engine::dtype_flag_name(w.shape.dtype));
  if (w.has_geometry) {
    const auto f = w.totals(work::Phase::forward), r = w.totals(work::Phase::recompute),
               b = w.totals(work::Phase::backward);
    s += fmt::format(
        "; per rank and micro-batch: matmul GFLOP forward {:.4g} + recompute {:.4g} + backward "
        "{:.4g}, {:.4g} GB read and written, {} kernels",
        f.flops * 1e-9, r.flops * 1e-9, b.flops * 1e-9, (f.bytes + r.bytes + b.bytes) * 1e-9,
        f.kernels + r.kernels + b.kernels);
  }
  s += "\n";
  if (!w.note.empty()) s += "# note: " + w.note + "\n";
  for (const auto& n : w.not_modelled) s += "# note: not modelled: " + n + "\n";
  return s;
}

}  // namespace dmuon::apps::bench
