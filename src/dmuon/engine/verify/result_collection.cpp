#include "dmuon/engine/verify/result_collection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>

#include "dmuon/base/check.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/engine/verify/reference.hpp"
#include "dmuon/engine/verify/replica_agreement.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/plan/tp_local_tree.hpp"

namespace dmuon::engine {

namespace {

// The median over steps [first, last) of a step-major array with `stride` values per step.
double median_over_steps(const std::vector<double>& per_step, std::size_t stride, std::size_t index,
                         int first, int last) {
  std::vector<double> v;
  for (int s = first; s < last; ++s)
    v.push_back(per_step[static_cast<std::size_t>(s) * stride + index]);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What every rank reports once per run; the run reports each field's max over the ranks.
struct RankFigures {
  std::int64_t hooks = 0, comm_hooks = 0, live_weight_bytes = 0, master_bytes = 0, state_bytes = 0,
               audit_failed = 0;
  std::array<std::int64_t, kChannelCount> calls{}, bytes{}, formula{};
};
static_assert(std::is_standard_layout_v<RankFigures> &&
                  sizeof(RankFigures) % sizeof(std::int64_t) == 0,
              "RankFigures is reduced as an array of int64");

RankFigures max_over_ranks(const RankFigures& mine, MPI_Comm comm) {
  RankFigures out;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &out,
                                static_cast<int>(sizeof(RankFigures) / sizeof(std::int64_t)),
                                MPI_INT64_T, MPI_MAX, comm));
  return out;
}

// The measured peak (docs/MEMORY.md "Measured"): the largest over the ranks (the lowest rank
// of equals) with that rank's terms and phase; reserved and uncounted bytes, max over ranks.
MeasuredMemory max_over_ranks(const MeasuredMemory& mine, int rank, MPI_Comm comm) {
  if (!mine.measured) return mine;  // the same backend on every rank
  struct {
    double bytes;
    int rank;
  } in{static_cast<double>(mine.peak_bytes), rank}, top{0, 0};
  DMUON_CHECK_MPI(MPI_Allreduce(&in, &top, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
  struct Packed {
    std::int64_t peak;
    std::array<std::int64_t, kMemoryTermCount> terms;
    char phase[16];
  } p{mine.peak_bytes, mine.terms_at_peak, {}};
  mine.phase.copy(p.phase, sizeof(p.phase) - 1);
  DMUON_CHECK_MPI(MPI_Bcast(&p, sizeof(Packed), MPI_BYTE, top.rank, comm));
  std::array<std::int64_t, 2> sizes{mine.reserved_bytes, mine.uncounted_bytes};
  DMUON_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, sizes.data(), 2, MPI_INT64_T, MPI_MAX, comm));
  MeasuredMemory out;
  out.measured = true;
  out.peak_bytes = p.peak;
  out.rank = top.rank;
  out.phase = p.phase;
  out.terms_at_peak = p.terms;
  out.reserved_bytes = sizes[0];
  out.uncounted_bytes = sizes[1];
  return out;
}

}  // namespace

ResultCollector::ResultCollector(const model::ModuleTree& tree, const plan::Plan& plan,
                                 const StepLayout& layout, const EngineOptions& o, MPI_Comm world)
    : tree_(tree),
      local_(plan.tp.tp > 1 ? plan::tp_local_tree(tree, plan) : tree),
      plan_(plan),
      layout_(layout),
      o_(o),
      world_(world),
      dp_(world) {
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank_));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size_));
  if (plan.tp.tp > 1) {
    MPI_Comm dp = MPI_COMM_NULL;
    DMUON_CHECK_MPI(MPI_Comm_split(world, layout.tp_rank(), layout.me.dp(), &dp));
    dp_split_ = comm::UniqueComm(dp);
    dp_ = dp;
  }
  // The audit's formula (step_volume.hpp): this rank's channels and the hooks of a step.
  const StepVolume formula = predict_step_volume(tree, plan, volume_options(o.step));
  expect_ = formula.of_rank(layout.me.rank);
  // --ep with --seq-len: the routed tokens' all-to-alls, as the work model's EP ops state
  // them (the plan's formula has no activation work).
  if (o.step.activation && layout.me.grid.ep > 1) {
    const auto [calls, bytes] = token_exchange_per_step(*o.step.activation, o.step.accum);
    auto& x = expect_[channel_index(CommGroup::ep, comm::CollectiveKind::all_to_all)];
    x.calls += calls;
    x.bytes += bytes;
  }
  // --pp: the stage's sends and receives (pipeline_order.hpp), outside the plan's formula.
  if (o.step.stages.active()) {
    const PipelineTraffic t = pipeline_traffic_per_step(o.step.stages, o.step.accum);
    auto& x = expect_[channel_index(CommGroup::pipeline, comm::CollectiveKind::send_recv)];
    x.calls += t.calls;
    x.bytes += t.bytes;
  }
  hooks_formula_ = formula.hooks_fired;
  comm_hooks_formula_ = formula.hooks_communicating;
  sites_formula_ = formula.hook_sites;
  phases_.assign(static_cast<std::size_t>(o.run.total_steps()) * kPhaseCount, 0.0);
  in_flight_.assign(static_cast<std::size_t>(o.run.total_steps()) * kChannelCount, 0.0);
}

void ResultCollector::record(long step, const StepMeasure& m, const ChannelCounters& moved) {
  std::copy(m.phases_ms.begin(), m.phases_ms.end(),
            phases_.begin() + (step - 1) * static_cast<long>(kPhaseCount));
  std::copy(m.in_flight_ms.begin(), m.in_flight_ms.end(),
            in_flight_.begin() + (step - 1) * static_cast<long>(kChannelCount));
  in_flight_measured_ = m.in_flight_measured;
  message_bytes_ = m.message_bytes;
  group_size_ = m.group_size;
  hooks_per_step_ = m.hook_calls;
  comm_hooks_per_step_ = m.hook_comm_calls;
  for (std::size_t c = 0; c < kChannelCount; ++c) {
    const auto& diff = moved[static_cast<std::size_t>(channel_group(c))];
    const auto k = channel_kind(c);
    calls_[c] = static_cast<std::int64_t>(diff[k].calls);
    bytes_[c] = static_cast<std::int64_t>(diff.volume(k));
    if (audit_message_.empty() && (calls_[c] != expect_[c].calls || bytes_[c] != expect_[c].bytes))
      audit_message_ = fmt::format(
          "rank {} step {} {}: measured {} calls / {} bytes, formula {} calls / {} bytes", rank_,
          step, channel_name(c), calls_[c], bytes_[c], expect_[c].calls, expect_[c].bytes);
  }
  if (traits(o_.step.method).reference_hooks && audit_message_.empty() &&
      (hooks_per_step_ != hooks_formula_ || comm_hooks_per_step_ != comm_hooks_formula_))
    audit_message_ = fmt::format(
        "rank {} step {}: {} hooks fired ({} communicating), formula {} ({})", rank_, step,
        hooks_per_step_, comm_hooks_per_step_, hooks_formula_, comm_hooks_formula_);
}

// Per-rank values to rank 0: the measured steps' phases (steps x ranks x phases) and the last
// step's calls, measured and formula bytes per channel (channels x ranks).
void ResultCollector::gather_per_rank(RunResult& r) const {
  const std::size_t np = kPhaseCount, nk = kChannelCount;
  const auto steps = static_cast<std::size_t>(o_.run.steps),
             ranks = static_cast<std::size_t>(size_);
  const std::vector<double> mine(phases_.begin() + static_cast<long>(o_.run.warmup * np),
                                 phases_.end());
  std::vector<double> all(rank_ == 0 ? mine.size() * ranks : 0);
  DMUON_CHECK_MPI(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                             static_cast<int>(mine.size()), MPI_DOUBLE, 0, world_));
  std::vector<std::int64_t> cnt;
  for (std::size_t i = 0; i < nk; ++i)
    cnt.insert(cnt.end(), {calls_[i], bytes_[i], expect_[i].bytes});
  std::vector<std::int64_t> allc(rank_ == 0 ? cnt.size() * ranks : 0);
  DMUON_CHECK_MPI(MPI_Gather(cnt.data(), static_cast<int>(cnt.size()), MPI_INT64_T, allc.data(),
                             static_cast<int>(cnt.size()), MPI_INT64_T, 0, world_));
  if (rank_ != 0) return;
  r.rank_phases_ms.resize(all.size());
  for (std::size_t q = 0; q < ranks; ++q)
    for (std::size_t t = 0; t < steps; ++t)
      for (std::size_t p = 0; p < np; ++p)
        r.rank_phases_ms[(t * ranks + q) * np + p] = all[(q * steps + t) * np + p];
  r.rank_calls.resize(nk * ranks);
  r.rank_bytes.resize(nk * ranks);
  r.rank_formula_bytes.resize(nk * ranks);
  for (std::size_t q = 0; q < ranks; ++q)
    for (std::size_t k = 0; k < nk; ++k) {
      r.rank_calls[k * ranks + q] = allc[q * 3 * nk + 3 * k];
      r.rank_bytes[k * ranks + q] = allc[q * 3 * nk + 3 * k + 1];
      r.rank_formula_bytes[k * ranks + q] = allc[q * 3 * nk + 3 * k + 2];
    }
}

// Each rank of a DP group writes what it holds (zeros elsewhere); one sum-reduce to the
// group's rank 0 is exact (with --tp: world rank t, holding TP rank t's shards).
std::vector<std::vector<float>> ResultCollector::gather_final(StepBackend& backend) {
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (const auto& p : layout_.params) {
    offset.push_back(total);
    total += static_cast<std::size_t>(p.numel);
  }
  int dp_rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(dp_, &dp_rank));
  std::vector<float> mine(total, 0.0f), all(dp_rank == 0 ? total : 0);
  for (std::size_t i = 0; i < layout_.params.size(); ++i) {
    const auto& p = layout_.params[i];
    float* dst = mine.data() + offset[i];
    // --ep: EP rank 0's experts stand in the result (its expert group's parts: E < G).
    const bool expert = plan_.is_expert(p.pid);
    if (expert && layout_.me.ep_rank() != 0) continue;
    const bool first_copy = expert ? layout_.me.expert_replica() == 0 : dp_rank == 0;
    const bool owner_copy =
        p.storage == Storage::owned ||
        ((p.storage == Storage::replicated || p.storage == Storage::expert) && first_copy);
    if (owner_copy) backend.read_masters(p.master_offset, p.numel, dst);
    // Every row holds the same shards: row 0's.
    if (p.sharded() && layout_.me.row() == 0 && p.shard_len() > 0)
      backend.read_masters(p.master_offset, p.shard_len(), dst + p.shard_begin);
  }
  // Chunked so counts stay below INT_MAX.
  const std::size_t max_chunk = std::size_t{1} << 28;
  for (std::size_t off = 0; off < total; off += max_chunk) {
    const int cnt = static_cast<int>(std::min(max_chunk, total - off));
    DMUON_CHECK_MPI(MPI_Reduce(mine.data() + off, dp_rank == 0 ? all.data() + off : nullptr, cnt,
                               MPI_FLOAT, MPI_SUM, 0, dp_));
  }
  std::vector<std::vector<float>> out;
  if (dp_rank == 0)
    for (std::size_t i = 0; i < layout_.params.size(); ++i)
      out.emplace_back(
          all.begin() + static_cast<std::ptrdiff_t>(offset[i]),
          all.begin() + static_cast<std::ptrdiff_t>(
                            offset[i] + static_cast<std::size_t>(layout_.params[i].numel)));
  return out;
}

// --ep: what this rank holds of its experts, from its masters (whole, or its shard).
std::vector<ResultCollector::HeldSpan> ResultCollector::own_experts(StepBackend& backend) const {
  std::vector<HeldSpan> out(layout_.params.size());
  for (std::size_t i = 0; i < layout_.params.size(); ++i) {
    const auto& p = layout_.params[i];
    if (!plan_.is_expert(p.pid) || p.master_offset < 0) continue;
    const std::int64_t n = p.sharded() ? p.shard_len() : p.numel;
    out[i].begin = p.sharded() ? p.shard_begin : 0;
    out[i].values.resize(static_cast<std::size_t>(n));
    if (n > 0) backend.read_masters(p.master_offset, n, out[i].values.data());
  }
  return out;
}

// Per step the max over ranks, then the median over the measured steps.
void ResultCollector::reduce_phases(RunResult& r) const {
  std::vector<double> maxph(phases_.size());
  DMUON_CHECK_MPI(MPI_Allreduce(phases_.data(), maxph.data(), static_cast<int>(phases_.size()),
                                MPI_DOUBLE, MPI_MAX, world_));
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    r.phases_ms[p] = median_over_steps(maxph, kPhaseCount, p, o_.run.warmup, o_.run.total_steps());
}

// Channels: per step the max over ranks of the in-flight time, then the median over steps;
// message bytes and group sizes, max over ranks.
void ResultCollector::reduce_channels(RunResult& r) const {
  std::vector<double> per_channel(in_flight_.size() + 2 * kChannelCount);
  std::copy(in_flight_.begin(), in_flight_.end(), per_channel.begin());
  for (std::size_t c = 0; c < kChannelCount; ++c) {
    per_channel[in_flight_.size() + c] = message_bytes_[c];
    per_channel[in_flight_.size() + kChannelCount + c] = group_size_[c];
  }
  DMUON_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, per_channel.data(),
                                static_cast<int>(per_channel.size()), MPI_DOUBLE, MPI_MAX, world_));
  for (std::size_t c = 0; c < kChannelCount; ++c) {
    auto& k = r.kinds[c];
    k.message_bytes = per_channel[in_flight_.size() + c];
    k.group_size = static_cast<int>(per_channel[in_flight_.size() + kChannelCount + c]);
    k.in_flight_ms = in_flight_measured_ ? median_over_steps(per_channel, kChannelCount, c,
                                                             o_.run.warmup, o_.run.total_steps())
                                         : std::numeric_limits<double>::quiet_NaN();
  }
}

// Counts, bytes and memory figures (max over ranks) and the audit verdict, with the lowest
// failing rank's first mismatch on every rank.
void ResultCollector::reduce_counts(RunResult& r) const {
  RankFigures mine;
  mine.hooks = hooks_per_step_;
  mine.comm_hooks = comm_hooks_per_step_;
  mine.live_weight_bytes = layout_.live_weight_bytes;
  mine.master_bytes = layout_.master_elems * 4;
  mine.state_bytes = (layout_.state_elems + layout_.second_state_elems) * 4;
  mine.audit_failed = audit_message_.empty() ? 0 : 1;
  for (std::size_t c = 0; c < kChannelCount; ++c) {
    mine.calls[c] = calls_[c];
    mine.bytes[c] = bytes_[c];
    mine.formula[c] = expect_[c].bytes;
  }
  const RankFigures mx = max_over_ranks(mine, world_);
  r.hook_calls_per_step = mx.hooks;
  r.hook_comm_calls_per_step = mx.comm_hooks;
  r.peak_packed_bytes = mx.live_weight_bytes;
  r.master_bytes = mx.master_bytes;
  r.momentum_bytes = mx.state_bytes;
  for (std::size_t c = 0; c < kChannelCount; ++c) {
    r.kinds[c].calls_per_step = mx.calls[c];
    r.kinds[c].bytes_measured = mx.bytes[c];
    r.kinds[c].bytes_formula = mx.formula[c];
  }
  r.audit_ok = mx.audit_failed == 0;
  if (!r.audit_ok)
    r.audit_message = comm::agree_first_message(!audit_message_.empty(), audit_message_, world_);
}

RunResult ResultCollector::finish(StepBackend& backend) {
  RunResult r;
  r.method = o_.step.method;
  r.reshard = plan::reshard_name(o_.step.reshard);
  r.world_size = size_;
  r.replicate = plan_.partition.options.replicate;
  r.tp = plan_.tp.tp;
  r.pipeline_stages = o_.step.stages.count;
  r.pipeline_stage = o_.step.stages.stage;
  gather_per_rank(r);
  reduce_phases(r);
  reduce_channels(r);
  reduce_counts(r);
  r.memory_measured = max_over_ranks(backend.measured_memory(), rank_, world_);
  const bool reference_hooks = traits(o_.step.method).reference_hooks;
  r.hook_sites =
      reference_hooks ? sites_formula_ : static_cast<std::int64_t>(layout_.groups.size());
  r.hook_calls_formula = reference_hooks ? hooks_formula_ : r.hook_calls_per_step;
  r.hook_comm_calls_formula = reference_hooks ? comm_hooks_formula_ : r.hook_comm_calls_per_step;
  if (!(o_.run.check || o_.run.keep_final_weights)) return r;
  r.final_weights = gather_final(backend);
  if (o_.run.check) check(r, backend);
  return r;
}

// --check: the final weights of each DP group (TP index) against the one-process reference
// on its rank 0, the worst over the world reported on every rank.
void ResultCollector::check(RunResult& r, StepBackend& backend) {
  r.checked = true;
  // --route RULE=...:bf16 puts the parameters it matched on a 16-bit wire.
  const kernels::Dtype route_wire =
      plan_.narrowest_route_wire_bytes() == 2 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
  // Newton–Schulz amplifies 16-bit rounding of a Muon parameter's inputs (check_note).
  bool sixteen_bit_muon =
      o_.step.wire != kernels::Dtype::f32 || o_.step.reduce_dtype() != kernels::Dtype::f32 ||
      (o_.backend.device == Device::cuda && o_.backend.ns_dtype != kernels::Dtype::f32);
  for (int pid : tree_.parameter_order())
    if (plan_.muon(pid) && plan_.wire_bytes(pid, 4) == 2) sixteen_bit_muon = true;
  const bool sixteen_bit = sixteen_bit_muon || route_wire != kernels::Dtype::f32;
  struct {
    double err;
    int rank;
  } mine{0, rank_}, worst{0, 0};
  std::int64_t excused = 0;
  // Rank 0 of its DP group checks what it gathered; --ep: every other rank what it holds of
  // its own experts (against the reference of its EP rank).
  std::vector<std::vector<float>> got = r.final_weights;
  std::vector<HeldSpan> held;
  if (got.empty() && plan_.config.ep > 1) {
    held = own_experts(backend);
    got.resize(held.size());
  }
  if (!got.empty()) {
    // The eps-regime excuse where the tolerance is fp32's (1e-4): a 16-bit tolerance (8 unit
    // roundoffs) already covers AdamW's isolated flips. A reference file brings its own.
    ReferenceWeights ref;
    if (o_.run.check_reference) {
      ref = o_.run.check_reference();
    } else {
      auto regime = std::make_shared<AdamwEpsRegime>();
      ref.weights = reference_weights(tree_, plan_, o_, layout_.me.grid.dp_size(),
                                      sixteen_bit ? nullptr : regime.get(), layout_.tp_rank(),
                                      layout_.me.ep_rank());
      ref.eps_regime = std::move(regime);
    }
    const AdamwEpsRegime* excuse = sixteen_bit ? nullptr : ref.eps_regime.get();
    for (std::size_t i = 0; i < got.size() && i < ref.weights.size(); ++i) {
      if (!got[i].empty()) continue;
      got[i] = ref.weights[i];  // not this rank's to check, but what it holds (own_experts)
      // (an empty shard past the end holds nothing)
      if (i < held.size() && held[i].begin >= 0 && !held[i].values.empty())
        std::copy(held[i].values.begin(), held[i].values.end(),
                  got[i].begin() + static_cast<std::ptrdiff_t>(held[i].begin));
    }
    mine.err = max_relative_error(local_, got, ref.weights, &r.worst_param, excuse, &excused);
    // --ep: an expert by its name in the full model (this rank's local index is ambiguous).
    if (const auto pid = local_.find_parameter(r.worst_param); pid && plan_.is_expert(*pid))
      r.worst_param = model::global_parameter_name(local_, *pid, layout_.me.ep_rank());
  }
  // The other ranks wait politely: with oversubscribed ranks a spinning collective would take
  // the cores the reference needs.
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Iallreduce(&mine, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, world_, &req));
  for (int done = 0; !done;) {
    DMUON_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.max_rel_error = worst.err;
  r.worst_param = comm::agree_first_message(rank_ == worst.rank, r.worst_param, world_);
  if (o_.step.method == Method::ddp_dmuon) {
    // Rank 0's replica matched the reference; every other replica must match rank 0's.
    const ReplicaDivergence d = replica_divergence(layout_, backend, world_);
    if (d.max_rel_error > r.max_rel_error) {
      r.max_rel_error = d.max_rel_error;
      r.worst_param = fmt::format("{} (replica of rank {})", d.param, d.rank);
    }
  }
  r.check_tolerance = o_.effective_check_tolerance(route_wire);
  r.check_passed = r.max_rel_error <= r.check_tolerance;  // ddp-dmuon: replicas included
  DMUON_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &excused, 1, MPI_INT64_T, MPI_SUM, world_));
  r.check_note = check_note(excused, sixteen_bit_muon);
}

std::string ResultCollector::check_note(std::int64_t excused, bool sixteen_bit_muon) const {
  std::string note;
  if (excused > 0)
    note = fmt::format(
        "{} AdamW element(s) whose gradient cancelled to the rounding level (|g| <= {:g} x "
        "rms at a step) moved up to 2 lr per such step apart from the reference and were "
        "left out of the error (ill-conditioned, not wrong: reference.hpp)",
        excused, AdamwEpsRegime::kRelative);
  if (!sixteen_bit_muon || !traits(o_.step.method).muon) return note;
  const auto& site_of = plan_.hooks.site_of_param;
  const std::int64_t need = full_rank_global_tokens(local_, [&](int pid) {
    return site_of[static_cast<std::size_t>(pid)] >= 0 || plan_.is_expert(pid);
  });
  if (o_.step.global_samples(layout_.me.grid.dp_size()) < need)
    note += std::string(note.empty() ? "" : "; ") +
            fmt::format(
                "some Muon parameters train on fewer samples than their rank: Newton-Schulz "
                "amplifies 16-bit rounding in the null directions; a 16-bit check is meaningful "
                "from --global-tokens {}",
                need);
  return note;
}

}  // namespace dmuon::engine
