#include "dmuon/engine/tp_engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/rank_layout.hpp"
#include "dmuon/comm/timed_barrier.hpp"
#include "dmuon/comm/unique_comm.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/grad_clip.hpp"
#include "dmuon/engine/host_backend.hpp"
#include "dmuon/engine/linear_work.hpp"
#include "dmuon/engine/optimizer_step.hpp"
#include "dmuon/engine/result_collection.hpp"
#include "dmuon/engine/step_executor.hpp"
#include "dmuon/engine/step_layout.hpp"
#include "dmuon/engine/step_schedule.hpp"
#include "dmuon/engine/tp_exchange.hpp"
#include "dmuon/plan/tp_volume.hpp"
#include "kernels/convert.hpp"

namespace dmuon::engine {

model::ModuleTree tp_local_tree(const model::ModuleTree& tree, const plan::Plan& plan) {
  model::ModuleTree local = tree;
  for (int pid : plan.tp.sharded)
    local.reshape_parameter(pid, boundary::tp_local_shape(
                                     tree.parameter(pid).shape,
                                     plan.tp.shard_dim[static_cast<std::size_t>(pid)], plan.tp.tp));
  return local;
}

std::vector<std::vector<float>> tp_reference_weights(const model::ModuleTree& tree,
                                                     const plan::Plan& plan, const EngineOptions& o,
                                                     int dp_size, int tp_rank) {
  const int T = plan.tp.tp;
  const auto local = tp_local_tree(tree, plan);
  const std::int64_t global = o.global_samples(dp_size);
  const auto& order = local.parameter_order();
  HostOptimizer opt(muon_config(o));
  struct Copy {  // one TP shard (or the whole parameter)
    LinearWork work;
    std::vector<float> w, g, m, v, x;
  };
  std::vector<std::vector<Copy>> copies(order.size());
  std::vector<bool> muon(order.size()), sharded(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int pid = order[i];
    const auto& p = local.parameter(pid);
    sharded[i] = plan.tp.is_sharded(pid);
    muon[i] = plan.hooks.site_of_param[static_cast<std::size_t>(pid)] >= 0;
    const auto n = static_cast<std::size_t>(p.numel());
    for (int c = 0; c < (sharded[i] ? T : 1); ++c) {
      const std::uint64_t key = sharded[i] ? tp_shard_key(pid, c) : static_cast<std::uint64_t>(pid);
      Copy copy{LinearWork(local, pid, global, 0, 1, o.accum, key),
                std::vector<float>(n),
                std::vector<float>(n, 0.0f),
                std::vector<float>(n, 0.0f),
                std::vector<float>(n, 0.0f),
                std::vector<float>(n, 0.0f)};
      init_weights(o.seed, key, copy.w.data(), p.numel(), matrix_shape(p).cols);
      copies[i].push_back(std::move(copy));
    }
  }
  std::vector<float> shards, full;
  const auto on_wire = [bf16 = o.comm_dtype == kernels::Dtype::bf16](float v) {
    return bf16 ? kernels::host::bf16_to_float(kernels::host::float_to_bf16(v)) : v;
  };
  for (long s = 1; s <= o.total_steps(); ++s) {
    // Every gradient first (the clip needs them all): K micro-batches accumulated, as
    // reference_weights does (accumulation.hpp); the TP exchange below runs once per step.
    for (auto& param_copies : copies)
      for (auto& c : param_copies)
        for (int j = 0; j < o.accum; ++j) {
          c.work.set_micro(j);
          c.work.forward(o.compute, o.seed, s, c.w.data());
          c.work.backward(o.compute, o.seed, s, c.w.data(), c.g.data(), {}, j > 0);
        }
    if (o.clip_norm > 0) {  // the logical model's norm: every TP shard, every other parameter once
      std::vector<GradSpan> grads;
      for (auto& param_copies : copies)
        for (auto& c : param_copies)
          grads.push_back({c.g.data(), static_cast<std::int64_t>(c.g.size())});
      clip_in_place(o, grads);
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& name = local.parameter(order[i]).name;
      const auto bad = [&](const char* what) {
        return CheckFailure(std::string("--check reference: non-finite ") + what + " in '" + name +
                            "'");
      };
      const auto n = copies[i].front().w.size();
      if (!muon[i]) {
        for (auto& c : copies[i])
          if (opt.adamw(c.w.data(), c.g.data(), c.m.data(), c.v.data(), n, s) != 0)
            throw bad("gradient");
        continue;
      }
      for (auto& c : copies[i])
        if (opt.prepare(c.g.data(), c.m.data(), c.x.data(), n, s) != 0) throw bad("gradient");
      const auto logical = matrix_shape(tree.parameter(order[i]));
      if (!sharded[i]) {
        auto& c = copies[i].front();
        opt.newton_schulz(c.x.data(), logical.rows, logical.cols, name);
        if (opt.apply(c.w.data(), c.x.data(), n, logical.rows, logical.cols) != 0)
          throw bad("weight");
        continue;
      }
      // Newton–Schulz on the logical matrix assembled from the T shards, as the TP owner does
      // (--comm-dtype bf16: each shard's Nesterov input rounded to bf16, as the gather sends it);
      // element by element here (the engine copies blocks, TpExchange::assemble/split): shard
      // c's (i, j) is the logical (c·lr + i, j) for a column-parallel shard (rows split), and
      // (i, c·lc + j) for a row-parallel one (columns split).
      const int dim = plan.tp.shard_dim[static_cast<std::size_t>(order[i])];
      const std::int64_t lr = dim == 0 ? logical.rows / T : logical.rows;
      const std::int64_t lc = dim == 1 ? logical.cols / T : logical.cols;
      const auto at = [&](int c, std::int64_t r, std::int64_t j) {
        const std::int64_t row = dim == 0 ? c * lr + r : r, col = dim == 1 ? c * lc + j : j;
        return static_cast<std::size_t>(row * logical.cols + col);
      };
      full.resize(n * static_cast<std::size_t>(T));
      for (int c = 0; c < T; ++c)
        for (std::int64_t r = 0; r < lr; ++r)
          for (std::int64_t j = 0; j < lc; ++j)
            full[at(c, r, j)] = on_wire(
                copies[i][static_cast<std::size_t>(c)].x[static_cast<std::size_t>(r * lc + j)]);
      opt.newton_schulz(full.data(), logical.rows, logical.cols, name);
      shards.resize(n);
      for (int c = 0; c < T; ++c) {
        for (std::int64_t r = 0; r < lr; ++r)
          for (std::int64_t j = 0; j < lc; ++j)
            shards[static_cast<std::size_t>(r * lc + j)] = full[at(c, r, j)];
        if (opt.apply(copies[i][static_cast<std::size_t>(c)].w.data(), shards.data(), n,
                      logical.rows, logical.cols) != 0)
          throw bad("weight");
      }
    }
  }
  std::vector<std::vector<float>> out;
  for (std::size_t i = 0; i < order.size(); ++i)
    out.push_back(std::move(copies[i][sharded[i] ? static_cast<std::size_t>(tp_rank) : 0].w));
  return out;
}

namespace {

// The first mismatch of this rank's TP counters of one step with the formula, or "".
std::string tp_audit(const plan::TpCommVolume& v, int rank, long step,
                     const comm::KindCounters& gather, const comm::KindCounters& scatter) {
  const std::string m = plan::tp_volume_mismatch(v, rank, gather, scatter);
  return m.empty() ? m : fmt::format("rank {} step {} {}", rank, step, m);
}

comm::KindCounters minus(const comm::KindCounters& a, const comm::KindCounters& b) {
  return {a.calls - b.calls, a.bytes_sent - b.bytes_sent, a.bytes_received - b.bytes_received};
}

// `msg` of the lowest world rank whose `failed` is set, on every rank ("" when none failed).
std::string first_message(bool failed, const std::string& msg, int rank, int size, MPI_Comm world) {
  int mine = failed ? rank : size, first = size;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world));
  if (first == size) return std::string();
  std::string out = msg;
  int len = rank == first ? static_cast<int>(out.size()) : 0;
  DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, first, world));
  out.resize(static_cast<std::size_t>(len));
  DMUON_CHECK_MPI(MPI_Bcast(out.data(), len, MPI_CHAR, first, world));
  return out;
}

// Rank 0's per-rank arrays for the whole world: finish() filled them for each DP group on its
// rank 0 (world rank t, dp 0); those T ranks form the TP group of DP rank 0, over which they
// are gathered and interleaved to world rank order (w = q * T + t). Then every phase's median
// over steps of the max over all ranks.
void widen_to_world(RunResult& r, int dp, int t, int T, int dp_size, MPI_Comm tp_comm) {
  if (dp != 0) return;
  const int size = dp_size * T;
  const auto widen = [&](auto& v, MPI_Datatype type, std::size_t inner) {
    using V = std::decay_t<decltype(v)>;
    V all(t == 0 ? v.size() * static_cast<std::size_t>(T) : 0);
    DMUON_CHECK_MPI(MPI_Gather(v.data(), static_cast<int>(v.size()), type, all.data(),
                               static_cast<int>(v.size()), type, 0, tp_comm));
    if (t != 0) return;
    // v is [outer][q][inner]; the result [outer][q * T + t][inner].
    const std::size_t per = static_cast<std::size_t>(dp_size) * inner;
    const std::size_t outer = v.size() / per;
    V out(all.size());
    for (int tt = 0; tt < T; ++tt)
      for (std::size_t o = 0; o < outer; ++o)
        for (int q = 0; q < dp_size; ++q)
          for (std::size_t i = 0; i < inner; ++i)
            out[(o * static_cast<std::size_t>(size) + static_cast<std::size_t>(q * T + tt)) *
                    inner +
                i] = all[static_cast<std::size_t>(tt) * v.size() + o * per +
                         static_cast<std::size_t>(q) * inner + i];
    v = std::move(out);
  };
  widen(r.rank_phases_ms, MPI_DOUBLE, kPhaseCount);
  widen(r.rank_calls, MPI_INT64_T, 1);
  widen(r.rank_bytes, MPI_INT64_T, 1);
  widen(r.rank_formula_bytes, MPI_INT64_T, 1);
  if (t != 0) return;
  const std::size_t steps =
      r.rank_phases_ms.size() / (kPhaseCount * static_cast<std::size_t>(size));
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    std::vector<double> v;
    for (std::size_t s = 0; s < steps; ++s) {
      double m = 0;
      for (int w = 0; w < size; ++w)
        m = std::max(
            m, r.rank_phases_ms[(s * static_cast<std::size_t>(size) + static_cast<std::size_t>(w)) *
                                    kPhaseCount +
                                p]);
      v.push_back(m);
    }
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    if (n > 0) r.phases_ms[p] = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
}

}  // namespace

RunResult run_tp_engine(const model::ModuleTree& tree, const plan::Plan& plan,
                        const EngineOptions& o, MPI_Comm world) {
  int size = 1, rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size));
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank));
  validate_run(tree, plan, o, size);
  comm::verify_same_on_all_ranks(plan::plan_hash(tree, plan), "DMuon plan", world);
  const int T = plan.tp.tp, t = rank % T, dp = rank / T, dp_size = size / T;
  MPI_Comm dp_raw = MPI_COMM_NULL, tp_raw = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split(world, t, dp, &dp_raw));
  const comm::UniqueComm dp_comm(dp_raw);
  DMUON_CHECK_MPI(MPI_Comm_split(world, dp, t, &tp_raw));
  const comm::UniqueComm tp_comm(tp_raw);

  const model::ModuleTree local = tp_local_tree(tree, plan);
  const comm::RankLayout ranks(dp_comm.get(), plan.partition.options.replicate);
  const StepLayout layout = make_layout(local, plan, layout_options(o, t), ranks.world_rank());
  const ScheduleOptions so = schedule_options(o);
  const Schedule schedule = make_schedule(layout, so);
  TpExchange tpx(layout, tp_comm.get(), so.wire);
  // --clip-norm: the norm's all-reduce spans the whole R x G x T world (grad_clip.hpp).
  const auto backend = make_host_backend(local, layout, o, ranks, dp_comm.get(), &tpx, world);
  StepExecutor executor(layout, schedule, so, *backend, o.inject_nan_step);
  EngineOptions ro = o;
  if (o.check) ro.check_reference = [&] { return tp_reference_weights(tree, plan, o, dp_size, t); };
  ResultCollector results(local, plan, layout, ro, dp_comm.get());
  const auto expect = plan::predict_tp_volume(tree, plan, o.reshard, o.grad_reduce,
                                              static_cast<int>(kernels::dtype_bytes(o.comm_dtype)));

  const comm::CollectiveCounters none;
  auto counters = [&](CommGroup g) -> comm::CollectiveCounters {
    const comm::Communicator* c = backend->comm(g);
    return c ? c->counters() : none;
  };
  std::string audit;
  comm::KindCounters last_gather, last_scatter;
  for (long s = 1; s <= o.total_steps(); ++s) {
    const auto shard_before = counters(CommGroup::shard);
    const auto replicate_before = counters(CommGroup::replicate);
    const auto world_before = counters(CommGroup::world);
    const auto gather_before = tpx.gather_counters(), scatter_before = tpx.scatter_counters();
    const double sync_ms = comm::timed_barrier_ms(world);  // as run_engine: aligned steps
    StepMeasure m = executor.run_step(s);
    m.phases_ms[static_cast<std::size_t>(Phase::step_sync)] = sync_ms;
    results.record(s, m, counters(CommGroup::shard) - shard_before,
                   counters(CommGroup::replicate) - replicate_before,
                   counters(CommGroup::world) - world_before);
    last_gather = minus(tpx.gather_counters(), gather_before);
    last_scatter = minus(tpx.scatter_counters(), scatter_before);
    if (audit.empty()) audit = tp_audit(expect, rank, s, last_gather, last_scatter);
    if (o.on_step) o.on_step(static_cast<int>(s), o.total_steps());
  }
  executor.finish();
  RunResult r = results.finish(*backend);

  // Verdicts and TP figures over the whole world (finish() reduced over this DP group only).
  const auto w = static_cast<std::size_t>(rank);
  std::int64_t loc[4] = {
      static_cast<std::int64_t>(last_gather.bytes_sent), expect.gather.bytes_per_rank[w],
      static_cast<std::int64_t>(last_scatter.bytes_received), expect.scatter.bytes_per_rank[w]};
  std::int64_t mx[4] = {};
  DMUON_CHECK_MPI(MPI_Allreduce(loc, mx, 4, MPI_INT64_T, MPI_MAX, world));
  r.tp = T;
  r.tp_gather_bytes = mx[0];
  r.tp_gather_formula = mx[1];
  r.tp_scatter_bytes = mx[2];
  r.tp_scatter_formula = mx[3];
  const std::int64_t mine[6] = {static_cast<std::int64_t>(last_gather.calls),  loc[0], loc[1],
                                static_cast<std::int64_t>(last_scatter.calls), loc[2], loc[3]};
  r.rank_tp.assign(rank == 0 ? static_cast<std::size_t>(size) * 6 : 0, 0);
  DMUON_CHECK_MPI(MPI_Gather(mine, 6, MPI_INT64_T, r.rank_tp.data(), 6, MPI_INT64_T, 0, world));
  const bool failed = !audit.empty() || !r.audit_ok;
  const std::string first = first_message(
      failed, audit.empty() ? fmt::format("TP index {}: {}", t, r.audit_message) : audit, rank,
      size, world);
  r.audit_ok = first.empty();
  r.audit_message = first;
  // The DP channels' figures: max over every rank (each DP group reduced its own).
  std::vector<std::int64_t> kinds;
  for (const auto& k : r.kinds)
    kinds.insert(kinds.end(), {k.calls_per_step, k.bytes_measured, k.bytes_formula});
  DMUON_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, kinds.data(), static_cast<int>(kinds.size()),
                                MPI_INT64_T, MPI_MAX, world));
  for (std::size_t i = 0; i < r.kinds.size(); ++i) {
    r.kinds[i].calls_per_step = kinds[3 * i];
    r.kinds[i].bytes_measured = kinds[3 * i + 1];
    r.kinds[i].bytes_formula = kinds[3 * i + 2];
  }
  widen_to_world(r, dp, t, T, dp_size, tp_comm.get());
  r.world_size = size;
  if (r.checked) {
    struct {
      double err;
      int rank;
    } mine{r.max_rel_error, rank}, worst{0, 0};
    DMUON_CHECK_MPI(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, world));
    r.max_rel_error = worst.err;
    r.check_passed = worst.err <= r.check_tolerance;
    int len = static_cast<int>(r.worst_param.size());
    DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, worst.rank, world));
    r.worst_param.resize(static_cast<std::size_t>(len));
    DMUON_CHECK_MPI(MPI_Bcast(r.worst_param.data(), len, MPI_CHAR, worst.rank, world));
  }
  return r;
}

}  // namespace dmuon::engine
