#include "dmuon/engine/result_collection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>

#include "dmuon/base/check.hpp"
#include "dmuon/engine/accumulation.hpp"
#include "dmuon/engine/reference.hpp"
#include "dmuon/engine/replica_agreement.hpp"
#include "dmuon/engine/synthetic.hpp"

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

}  // namespace

ResultCollector::ResultCollector(const model::ModuleTree& tree, const plan::Plan& plan,
                                 const StepLayout& layout, const EngineOptions& o, MPI_Comm world)
    : tree_(tree), plan_(plan), layout_(layout), o_(o), world_(world) {
  DMUON_CHECK_MPI(MPI_Comm_rank(world, &rank_));
  DMUON_CHECK_MPI(MPI_Comm_size(world, &size_));
  const int wire_bytes = static_cast<int>(kernels::dtype_bytes(o.comm_dtype));
  const auto& po = plan.partition.options;
  predicted_ =
      plan::predict_dmuon_volume(tree, plan.hooks, plan.partition, o.reshard, o.grad_reduce,
                                 wire_bytes, nullptr, &plan.route_wire_bytes);
  expect_ = expected_volume(o.method, o.reshard, tree, plan, predicted_, rank_, po.shard,
                            po.replicate, wire_bytes, o.accum, o.clip_norm > 0);
  // --accum: hooks fire every micro-step; backward-post communicates once (accumulation.hpp).
  predicted_ = accumulated_volume(predicted_, o.accum);
  phases_.assign(static_cast<std::size_t>(o.total_steps()) * kPhaseCount, 0.0);
  in_flight_.assign(static_cast<std::size_t>(o.total_steps()) * kChannelCount, 0.0);
}

void ResultCollector::record(long step, const StepMeasure& m, const comm::CollectiveCounters& shard,
                             const comm::CollectiveCounters& replicate,
                             const comm::CollectiveCounters& world) {
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
    const CommGroup group = channel_group(c);
    const auto& diff = group == CommGroup::shard       ? shard
                       : group == CommGroup::replicate ? replicate
                                                       : world;
    const auto k = channel_kind(c);
    calls_[c] = static_cast<std::int64_t>(diff[k].calls);
    bytes_[c] = static_cast<std::int64_t>(diff.volume(k));
    if (audit_message_.empty() && (calls_[c] != expect_[c].calls || bytes_[c] != expect_[c].bytes))
      audit_message_ = fmt::format(
          "rank {} step {} {}: measured {} calls / {} bytes, formula {} calls / {} bytes", rank_,
          step, channel_name(c), calls_[c], bytes_[c], expect_[c].calls, expect_[c].bytes);
  }
  if (o_.method == Method::dmuon && audit_message_.empty() &&
      (hooks_per_step_ != predicted_.hooks_fired ||
       comm_hooks_per_step_ != predicted_.hooks_communicating))
    audit_message_ =
        fmt::format("rank {} step {}: {} hooks fired ({} communicating), formula {} ({})", rank_,
                    step, hooks_per_step_, comm_hooks_per_step_, predicted_.hooks_fired,
                    predicted_.hooks_communicating);
}

// Per-rank values to rank 0: the measured steps' phases (steps x ranks x phases) and the last
// step's calls, measured and formula bytes per channel (channels x ranks).
void ResultCollector::gather_per_rank(RunResult& r) const {
  const std::size_t np = kPhaseCount, nk = kChannelCount;
  const auto steps = static_cast<std::size_t>(o_.steps), ranks = static_cast<std::size_t>(size_);
  const std::vector<double> mine(phases_.begin() + static_cast<long>(o_.warmup * np),
                                 phases_.end());
  std::vector<double> all(rank_ == 0 ? mine.size() * ranks : 0);
  DMUON_CHECK_MPI(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                             static_cast<int>(mine.size()), MPI_DOUBLE, 0, world_));
  std::vector<std::int64_t> cnt;
  for (std::size_t i = 0; i < nk; ++i) {
    cnt.push_back(calls_[i]);
    cnt.push_back(bytes_[i]);
    cnt.push_back(expect_[i].bytes);
  }
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

// Each rank writes what it holds (zeros elsewhere); one sum-reduce to rank 0 is exact.
std::vector<std::vector<float>> ResultCollector::gather_final(StepBackend& backend) {
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (const auto& p : layout_.params) {
    offset.push_back(total);
    total += static_cast<std::size_t>(p.numel);
  }
  std::vector<float> mine(total, 0.0f), all(rank_ == 0 ? total : 0);
  std::vector<float> part;
  for (std::size_t i = 0; i < layout_.params.size(); ++i) {
    const auto& p = layout_.params[i];
    float* dst = mine.data() + offset[i];
    const bool owner_copy =
        p.storage == Storage::owned || (p.storage == Storage::replicated && rank_ == 0);
    if (owner_copy) backend.read_masters(p.master_offset, p.numel, dst);
    if (p.storage == Storage::sharded && layout_.me.row == 0) {  // every row holds the same
      const std::int64_t begin = layout_.me.column * p.chunk;
      const std::int64_t len = std::max<std::int64_t>(0, std::min(p.chunk, p.numel - begin));
      if (len > 0) backend.read_masters(p.master_offset, len, dst + begin);
    }
  }
  // Chunked so counts stay below INT_MAX.
  const std::size_t max_chunk = std::size_t{1} << 28;
  for (std::size_t off = 0; off < total; off += max_chunk) {
    const int cnt = static_cast<int>(std::min(max_chunk, total - off));
    DMUON_CHECK_MPI(MPI_Reduce(mine.data() + off, rank_ == 0 ? all.data() + off : nullptr, cnt,
                               MPI_FLOAT, MPI_SUM, 0, world_));
  }
  std::vector<std::vector<float>> out;
  if (rank_ == 0)
    for (std::size_t i = 0; i < layout_.params.size(); ++i)
      out.emplace_back(
          all.begin() + static_cast<std::ptrdiff_t>(offset[i]),
          all.begin() + static_cast<std::ptrdiff_t>(
                            offset[i] + static_cast<std::size_t>(layout_.params[i].numel)));
  return out;
}

RunResult ResultCollector::finish(StepBackend& backend) {
  RunResult r;
  r.method = o_.method;
  r.reshard = plan::reshard_name(o_.reshard);
  r.world_size = size_;
  r.replicate = plan_.partition.options.replicate;
  const bool dm = o_.method == Method::dmuon;
  gather_per_rank(r);
  // Per step the max over ranks, then the median over the measured steps.
  std::vector<double> maxph(phases_.size());
  DMUON_CHECK_MPI(MPI_Allreduce(phases_.data(), maxph.data(), static_cast<int>(phases_.size()),
                                MPI_DOUBLE, MPI_MAX, world_));
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    r.phases_ms[p] = median_over_steps(maxph, kPhaseCount, p, o_.warmup, o_.total_steps());
  // Channels: per step the max over ranks of the in-flight time, then the median over steps.
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
                                                             o_.warmup, o_.total_steps())
                                         : std::numeric_limits<double>::quiet_NaN();
  }
  std::vector<std::int64_t> loc = {hooks_per_step_, comm_hooks_per_step_, layout_.live_weight_bytes,
                                   layout_.master_elems * 4,
                                   (layout_.state_elems + layout_.second_state_elems) * 4};
  for (std::size_t i = 0; i < kChannelCount; ++i) {
    loc.push_back(calls_[i]);
    loc.push_back(bytes_[i]);
    loc.push_back(expect_[i].bytes);
  }
  loc.push_back(audit_message_.empty() ? 0 : 1);
  std::vector<std::int64_t> mx(loc.size());
  DMUON_CHECK_MPI(MPI_Allreduce(loc.data(), mx.data(), static_cast<int>(loc.size()), MPI_INT64_T,
                                MPI_MAX, world_));
  r.hook_calls_per_step = mx[0];
  r.hook_comm_calls_per_step = mx[1];
  r.peak_packed_bytes = mx[2];
  r.master_bytes = mx[3];
  r.momentum_bytes = mx[4];
  for (std::size_t i = 0; i < kChannelCount; ++i) {
    r.kinds[i].calls_per_step = mx[5 + 3 * i];
    r.kinds[i].bytes_measured = mx[6 + 3 * i];
    r.kinds[i].bytes_formula = mx[7 + 3 * i];
  }
  r.audit_ok = mx.back() == 0;
  if (!r.audit_ok) {
    // The lowest failing rank's message, to every rank.
    int mine = audit_message_.empty() ? size_ : rank_, first = 0;
    DMUON_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world_));
    std::string msg = audit_message_;
    int len = rank_ == first ? static_cast<int>(msg.size()) : 0;
    DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, first, world_));
    msg.resize(static_cast<std::size_t>(len));
    DMUON_CHECK_MPI(MPI_Bcast(msg.data(), len, MPI_CHAR, first, world_));
    r.audit_message = msg;
  }
  r.hook_sites = dm ? static_cast<std::int64_t>(plan_.hooks.sites.size())
                    : static_cast<std::int64_t>(layout_.groups.size());
  r.hook_calls_formula = dm ? predicted_.hooks_fired : r.hook_calls_per_step;
  r.hook_comm_calls_formula = dm ? predicted_.hooks_communicating : r.hook_comm_calls_per_step;
  if (!(o_.check || o_.keep_final_weights)) return r;
  r.final_weights = gather_final(backend);
  if (o_.check) {
    r.checked = true;
    double err = 0;
    std::int64_t excused = 0;
    // --route RULE=...:bf16 puts the parameters it matched on a 16-bit wire.
    const kernels::Dtype route_wire =
        plan_.narrowest_route_wire_bytes() == 2 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
    // Newton–Schulz amplifies 16-bit rounding of a Muon parameter's inputs (the note below).
    bool sixteen_bit_muon = o_.comm_dtype != kernels::Dtype::f32 ||
                            (o_.device == Device::cuda && o_.ns_dtype != kernels::Dtype::f32);
    for (int pid : tree_.parameter_order())
      if (plan_.muon(pid) && plan_.wire_bytes(pid, 4) == 2) sixteen_bit_muon = true;
    const bool sixteen_bit = sixteen_bit_muon || route_wire != kernels::Dtype::f32;
    if (rank_ == 0) {
      // The eps-regime excuse where the tolerance is fp32's (1e-4): a 16-bit tolerance (8 unit
      // roundoffs) already covers AdamW's isolated flips. A reference file brings its own.
      ReferenceWeights ref;
      if (o_.check_reference) {
        ref = o_.check_reference();
      } else {
        auto regime = std::make_shared<AdamwEpsRegime>();
        ref.weights =
            reference_weights(tree_, plan_, o_, size_, sixteen_bit ? nullptr : regime.get());
        ref.eps_regime = std::move(regime);
      }
      const AdamwEpsRegime* excuse = sixteen_bit ? nullptr : ref.eps_regime.get();
      err =
          max_relative_error(tree_, r.final_weights, ref.weights, &r.worst_param, excuse, &excused);
    }
    // The other ranks wait politely: with oversubscribed ranks a spinning MPI_Bcast would take
    // the cores rank 0 needs for the reference.
    MPI_Request req = MPI_REQUEST_NULL;
    DMUON_CHECK_MPI(MPI_Ibcast(&err, 1, MPI_DOUBLE, 0, world_, &req));
    for (int done = 0; !done;) {
      DMUON_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    r.max_rel_error = err;
    if (o_.method == Method::ddp_dmuon) {
      // Rank 0's replica matched the reference; every other replica must match rank 0's.
      const ReplicaDivergence d = replica_divergence(layout_, backend, world_);
      if (d.max_rel_error > err) {
        r.max_rel_error = d.max_rel_error;
        r.worst_param = fmt::format("{} (replica of rank {})", d.param, d.rank);
      }
    }
    r.check_tolerance = o_.effective_check_tolerance(route_wire);
    r.check_passed = r.max_rel_error <= r.check_tolerance;  // ddp-dmuon: replicas included
    DMUON_CHECK_MPI(MPI_Bcast(&excused, 1, MPI_INT64_T, 0, world_));
    if (excused > 0)
      r.check_note = fmt::format(
          "{} AdamW element(s) whose gradient cancelled to the rounding level (|g| <= {:g} x "
          "rms at a step) moved up to 2 lr per such step apart from the reference and were "
          "left out of the error (ill-conditioned, not wrong: reference.hpp)",
          excused, AdamwEpsRegime::kRelative);
    if (sixteen_bit_muon && o_.method != Method::fsdp_adamw) {
      const auto& site_of = plan_.hooks.site_of_param;
      const std::int64_t need = full_rank_global_tokens(
          tree_, [&](int pid) { return site_of[static_cast<std::size_t>(pid)] >= 0; });
      if (o_.global_samples(size_) < need)
        r.check_note +=
            std::string(r.check_note.empty() ? "" : "; ") +
            fmt::format(
                "some Muon parameters train on fewer samples than their rank: Newton-Schulz "
                "amplifies 16-bit rounding in the null directions; a 16-bit check is meaningful "
                "from --global-tokens {}",
                need);
    }
  }
  return r;
}

}  // namespace dmuon::engine
