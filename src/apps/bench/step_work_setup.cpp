#include "bench/step_work_setup.hpp"

#include "bench/bench_output.hpp"

#include <fmt/format.h>

#include "dmuon/engine/step/activation_work.hpp"

namespace dmuon::apps::bench {

std::optional<work::StepWork> attach_step_work(RunOptions& o, const model::Topology& topology,
                                               kernels::Dtype dtype, const work::TensorParallel& tp,
                                               const model::ModuleTree* rank_tree) {
  const auto& wl = o.workload;
  if (wl.seq_len <= 0) return std::nullopt;
  work::RunShape shape;
  shape.seq_len = wl.seq_len;
  shape.micro_batch = wl.micro_batch;
  shape.dtype = dtype;
  shape.ac = wl.ac;
  shape.fusion = wl.fusion;
  shape.float8 = o.engine.step.float8();
  shape.tp = tp;
  shape.cp.size = wl.cp;
  shape.ep.size = o.plan.ep;
  shape.ep.dispatcher = wl.ep_dispatcher;
  shape.ep.routing = wl.routing;
  auto w = work::build_step_work(topology, shape);
  o.engine.step.activation = engine::activation_work(w);
  if (rank_tree)
    o.engine.step.activation =
        engine::in_tree_of(*o.engine.step.activation, topology.tree, *rank_tree);
  return w;
}

std::string step_work_lines(const RunOptions& o, const work::StepWork& w) {
  const auto& wl = o.workload;
  std::string s = fmt::format(
      "# step work: seq {} x micro-batch {} per rank, ac {}, fusion {}, compute {}", wl.seq_len,
      wl.micro_batch, work::ac_policy_name(wl.ac), work::fusion_name(wl.fusion),
      w.shape.float8 ? "fp8 (float8 linears, the rest bf16)"
                     : engine::dtype_flag_name(w.shape.dtype));
  if (wl.attention_kernel != project::kDefaultAttentionKernel)
    s +=
        fmt::format(", attention kernel {} (the machine's attention_kernels)", wl.attention_kernel);
  if (w.shape.tp.size > 1)
    s += fmt::format("; one TP rank's of {}{}", w.shape.tp.size,
                     w.shape.tp.sequence ? ", sequence-parallel" : "");
  if (w.shape.cp.size > 1)
    s += fmt::format("; one CP rank's {} tokens of each sequence (--cp {})",
                     w.shape.local_seq_len(), w.shape.cp.size);
  if (w.has_geometry) {
    const auto f = w.totals(work::Phase::forward), r = w.totals(work::Phase::recompute),
               b = w.totals(work::Phase::backward);
    s += fmt::format(
        "; per rank and micro-batch: matmul GFLOP forward {:.4g} + recompute {:.4g} + backward "
        "{:.4g}, {:.4g} GB read and written, {} kernels",
        f.flops * 1e-9, r.flops * 1e-9, b.flops * 1e-9, (f.bytes + r.bytes + b.bytes) * 1e-9,
        f.kernels + r.kernels + b.kernels);
  }
  // Every line within the tables' 160 columns.
  s = wrap_comment(s, 160);
  if (!w.note.empty()) s += wrap_comment("# note: " + w.note, 160);
  // dmuon_bench --tp: the engine's TP shards are Linears of the local shape, nothing more.
  if (o.plan.tp > 1 && w.shape.tp.size == 1)
    s += wrap_comment(
        fmt::format("# note: --tp {}: each TP rank runs its DP group's whole activation work "
                    "(attention, norms, loss), unsplit and without TP activation collectives "
                    "(dmuon_project splits it: docs/STEP-WORK.md \"Tensor parallelism\")",
                    o.plan.tp),
        160);
  for (const auto& n : w.not_modelled) s += wrap_comment("# note: not modelled: " + n, 160);
  return s;
}

}  // namespace dmuon::apps::bench
