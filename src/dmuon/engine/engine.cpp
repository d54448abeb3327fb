#include "dmuon/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/baseline_volume.hpp"
#include "dmuon/engine/optimizer.hpp"
#include "dmuon/engine/reference.hpp"
#include "dmuon/engine/synthetic.hpp"
#include "kernels/newton_schulz.hpp"
#include "kernels/pack.hpp"

namespace dmuon::engine {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward_comm: return "forward_comm";
    case Phase::forward_compute: return "forward_compute";
    case Phase::backward_compute: return "backward_compute";
    case Phase::backward_comm: return "backward_comm";
    case Phase::optimizer_ns: return "optimizer_ns";
    case Phase::optimizer_other: return "optimizer_other";
    case Phase::exposed_comm: return "exposed_comm";
    case Phase::step: return "step";
  }
  return "?";
}

std::int64_t RunResult::bytes_measured_total() const {
  std::int64_t t = 0;
  for (const auto& k : kinds) t += k.bytes_measured;
  return t;
}
std::int64_t RunResult::bytes_formula_total() const {
  std::int64_t t = 0;
  for (const auto& k : kinds) t += k.bytes_formula;
  return t;
}

kernels::host::NsWorkspace& NsWorkspaces::get(std::int64_t rows, std::int64_t cols) {
  auto& w = ws_[{rows, cols}];
  if (!w)
    w = std::make_unique<kernels::host::NsWorkspace>(static_cast<std::size_t>(rows),
                                                     static_cast<std::size_t>(cols));
  return *w;
}
std::int64_t NsWorkspaces::bytes() const {
  std::int64_t b = 0;
  for (const auto& w : ws_) b += static_cast<std::int64_t>(w.second->bytes());
  return b;
}

void validate_run(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                  int world_size) {
  validate(o, world_size);
  if (plan.partition.options.replicate != 1)
    throw InputError(
        fmt::format("--replicate {}: HSDP not implemented yet in the engine (valid: 1)",
                    plan.partition.options.replicate));
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    if (p.dtype != model::DType::f32)
      throw InputError(fmt::format("parameter '{}' is {}: the engine runs float32 parameters only",
                                   p.name, model::dtype_name(p.dtype)));
  }
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

enum class Storage { owned, remote, sharded, replicated };
enum class GroupKind { fsdp, dmuon_site, ddp };

struct ParamState {
  int pid = -1;
  std::string name;
  MatrixShape shape;
  std::int64_t numel = 0;
  std::int64_t chunk = 0;  // sharded: elements per rank
  Storage storage = Storage::replicated;
  bool muon = false;
  int owner = -1;
  float* full = nullptr;        // full weights used by compute
  std::vector<float> master;    // owned: numel; replicated: numel
  std::vector<float> shard;     // sharded: chunk
  std::vector<float> gathered;  // sharded: G·chunk
  std::vector<float> momentum, exp_avg, exp_avg_sq;
  std::vector<float> grad;        // numel (or G·chunk padded)
  std::vector<float> grad_shard;  // sharded: chunk
  LinearWork work;
};

struct PackedBuffer {
  int owner = -1;
  std::vector<int> members;  // indices into states
  std::vector<float> data;
};

struct Group {
  GroupKind kind = GroupKind::fsdp;
  std::vector<int> members;  // indices into states, model order
  std::vector<PackedBuffer> packed;
  std::int64_t live_bytes = 0;  // bytes of gathered/packed buffers while the group is live
};

class Runner {
 public:
  Runner(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
         MPI_Comm world)
      : tree_(tree), plan_(plan), o_(o) {
    MPI_Comm_rank(world, &rank_);
    MPI_Comm_size(world, &size_);
    world_ = world;
    comm_ = comm::make_communicator(comm::Backend::mpi, world);
    build();
  }

  RunResult run();

 private:
  void gather_per_rank(const std::vector<double>& phases,
                       const std::array<std::int64_t, comm::kCollectiveKindCount>& calls,
                       const std::array<std::int64_t, comm::kCollectiveKindCount>& bytes,
                       const VolumeExpectation& expect, RunResult& r);
  void build();
  void step(long s, std::array<double, kPhaseCount>& ph);
  void pack_owned(PackedBuffer& b);
  void fwd_pre(Group& g);
  void optimizer(long s, std::array<double, kPhaseCount>& ph);
  void check_finite(const float* x, std::int64_t n, const std::string& what,
                    const std::string& name, long s) const {
    if (kernels::host::count_non_finite(x, static_cast<std::size_t>(n)) != 0)
      comm::abort_all(fmt::format("non-finite {} in parameter '{}' at step {}", what, name, s));
  }
  std::vector<std::vector<float>> gather_final();
  // Hook sites whose pre/post-forward hooks run: DMuon sites; FSDP units of the fsdp methods
  // (dmuon's non-dedicated unit is not a DMuon hook site). DDP has post-backward hooks only.
  bool hooked(const Group& g) const {
    return g.kind == GroupKind::dmuon_site ||
           (g.kind == GroupKind::fsdp && o_.method != Method::dmuon);
  }

  const model::ModuleTree& tree_;
  const plan::Plan& plan_;
  EngineOptions o_;
  MPI_Comm world_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<comm::Communicator> comm_;
  std::vector<ParamState> states_;
  std::vector<Group> groups_;
  NsWorkspaces ns_;
  std::vector<float> ns_out_;
  std::int64_t hook_calls_ = 0;
  int nan_param_ = -1;  // index into states_ poisoned by --inject-nan-step
};

void Runner::build() {
  const Method m = o_.method;
  const int G = size_;
  const std::int64_t global = o_.global_samples(G);
  const auto& site_of = plan_.hooks.site_of_param;
  std::vector<int> state_of(tree_.num_parameters(), -1);
  for (int pid : tree_.parameter_order()) {
    const auto& p = tree_.parameter(pid);
    ParamState st;
    st.pid = pid;
    st.name = p.name;
    st.shape = matrix_shape(p);
    st.numel = p.numel();
    const bool dedicated = site_of[static_cast<std::size_t>(pid)] >= 0;
    st.muon = dedicated && m != Method::fsdp_adamw;
    if (m == Method::ddp_muon)
      st.storage = Storage::replicated;
    else if (m == Method::dmuon && dedicated) {
      st.owner = plan_.partition.owner_rank(pid);
      st.storage = st.owner == rank_ ? Storage::owned : Storage::remote;
    } else
      st.storage = Storage::sharded;
    const auto n = static_cast<std::size_t>(st.numel);
    // Muon keeps momentum, AdamW two moments, over whatever this rank updates (full or shard).
    auto zero_optimizer_state = [&st](std::size_t size) {
      if (st.muon) {
        st.momentum.assign(size, 0.0f);
      } else {
        st.exp_avg.assign(size, 0.0f);
        st.exp_avg_sq.assign(size, 0.0f);
      }
    };
    std::vector<float> init(n);
    init_weights(o_.seed, pid, init.data(), st.numel, st.shape.cols);
    switch (st.storage) {
      case Storage::owned:
        st.master = init;
        st.momentum.assign(n, 0.0f);
        st.grad.assign(n, 0.0f);
        break;
      case Storage::remote: st.grad.assign(n, 0.0f); break;
      case Storage::replicated:
        st.master = init;
        st.full = st.master.data();
        st.grad.assign(n, 0.0f);
        zero_optimizer_state(n);
        break;
      case Storage::sharded: {
        st.chunk = shard_chunk(st.numel, G);
        const auto c = static_cast<std::size_t>(st.chunk);
        st.shard.assign(c, 0.0f);
        for (std::size_t j = 0; j < c; ++j) {
          const std::size_t gi = static_cast<std::size_t>(rank_) * c + j;
          if (gi < n) st.shard[j] = init[gi];
        }
        st.gathered.assign(c * static_cast<std::size_t>(G), 0.0f);
        st.full = st.gathered.data();
        st.grad.assign(c * static_cast<std::size_t>(G), 0.0f);
        st.grad_shard.assign(c, 0.0f);
        zero_optimizer_state(c);
        break;
      }
    }
    st.work = LinearWork(pid, p, global, rank_, G);
    state_of[static_cast<std::size_t>(pid)] = static_cast<int>(states_.size());
    states_.push_back(std::move(st));
  }
  // Groups: the non-dedicated parameters first (one FSDP unit), then one per hook site.
  const GroupKind site_kind = m == Method::dmuon      ? GroupKind::dmuon_site
                              : m == Method::ddp_muon ? GroupKind::ddp
                                                      : GroupKind::fsdp;
  Group rest;
  rest.kind = m == Method::ddp_muon ? GroupKind::ddp : GroupKind::fsdp;
  for (int pid : tree_.parameter_order())
    if (site_of[static_cast<std::size_t>(pid)] < 0)
      rest.members.push_back(state_of[static_cast<std::size_t>(pid)]);
  if (!rest.members.empty()) groups_.push_back(std::move(rest));
  for (const auto& site : plan_.hooks.sites) {
    Group g;
    g.kind = site_kind;
    for (int pid : site.params) g.members.push_back(state_of[static_cast<std::size_t>(pid)]);
    if (g.kind == GroupKind::dmuon_site) {
      std::map<int, std::size_t> by_owner;
      for (int si : g.members) {
        const int owner = states_[static_cast<std::size_t>(si)].owner;
        auto it = by_owner.find(owner);
        if (it == by_owner.end()) {
          // Owners in order of first appearance in the site (model order).
          it = by_owner.emplace(owner, g.packed.size()).first;
          g.packed.push_back(PackedBuffer{owner, {}, {}});
        }
        g.packed[it->second].members.push_back(si);
      }
      for (auto& b : g.packed) {
        std::size_t total = 0;
        for (int si : b.members)
          total += static_cast<std::size_t>(states_[static_cast<std::size_t>(si)].numel);
        b.data.assign(total, 0.0f);
        std::size_t off = 0;
        for (int si : b.members) {
          auto& st = states_[static_cast<std::size_t>(si)];
          st.full = b.data.data() + off;  // compute reads the packed copy, also on the owner
          off += static_cast<std::size_t>(st.numel);
        }
        g.live_bytes += static_cast<std::int64_t>(4 * total);
      }
    }
    groups_.push_back(std::move(g));
  }
  for (auto& g : groups_)
    if (g.kind == GroupKind::fsdp)
      for (int si : g.members)
        g.live_bytes +=
            static_cast<std::int64_t>(4 * states_[static_cast<std::size_t>(si)].gathered.size());
  if (o_.inject_nan_step > 0) {
    nan_param_ = 0;
    for (std::size_t i = 0; i < states_.size(); ++i)
      if (site_of[static_cast<std::size_t>(states_[i].pid)] >= 0) {
        nan_param_ = static_cast<int>(i);
        break;
      }
  }
  std::int64_t max_numel = 0;
  for (const auto& st : states_) max_numel = std::max(max_numel, st.numel);
  ns_out_.assign(static_cast<std::size_t>(max_numel) * 2 + 16, 0.0f);
}

void Runner::pack_owned(PackedBuffer& b) {
  if (b.owner != rank_) return;
  std::vector<kernels::ConstSlice> parts;
  parts.reserve(b.members.size());
  for (int si : b.members) {
    const auto& st = states_[static_cast<std::size_t>(si)];
    parts.push_back({st.master.data(), static_cast<std::size_t>(st.numel)});
  }
  kernels::host::pack(parts.data(), parts.size(), b.data.data(), b.data.size());
}

void Runner::fwd_pre(Group& g) {
  if (g.kind == GroupKind::ddp) return;
  if (g.kind == GroupKind::dmuon_site) {
    for (auto& b : g.packed) pack_owned(b);
    comm_->group_start();
    for (auto& b : g.packed)
      comm_->broadcast(b.data.data(), b.data.size(), comm::DType::f32, b.owner);
    comm_->group_end().wait();
    return;
  }
  comm_->group_start();
  for (int si : g.members) {
    auto& st = states_[static_cast<std::size_t>(si)];
    comm_->all_gather(st.shard.data(), st.gathered.data(), static_cast<std::size_t>(st.chunk),
                      comm::DType::f32);
  }
  comm_->group_end().wait();
}

void Runner::step(long s, std::array<double, kPhaseCount>& ph) {
  const bool z3 = o_.reshard == plan::Reshard::z3;
  auto& fwd_comm = ph[static_cast<std::size_t>(Phase::forward_comm)];
  auto& fwd_comp = ph[static_cast<std::size_t>(Phase::forward_compute)];
  auto& bwd_comp = ph[static_cast<std::size_t>(Phase::backward_compute)];
  auto& bwd_comm = ph[static_cast<std::size_t>(Phase::backward_comm)];
  const auto t_step = Clock::now();
  // Forward, groups in order.
  for (auto& g : groups_) {
    auto t0 = Clock::now();
    fwd_pre(g);
    if (hooked(g)) ++hook_calls_;  // forward-pre: broadcast / all-gather
    fwd_comm += ms_since(t0);
    t0 = Clock::now();
    for (int si : g.members) {
      auto& st = states_[static_cast<std::size_t>(si)];
      st.work.forward(o_.compute, o_.seed, s, st.full);
    }
    fwd_comp += ms_since(t0);
    if (z3 && hooked(g)) ++hook_calls_;  // forward-post: free
  }
  // Backward, groups in reverse; each group's gradient collectives stay in flight while the
  // next group computes.
  std::vector<comm::Batch> pending;
  for (auto git = groups_.rbegin(); git != groups_.rend(); ++git) {
    auto& g = *git;
    auto t0 = Clock::now();
    if (z3) {
      fwd_pre(g);  // Z3: re-broadcast / re-gather before backward
      if (hooked(g)) ++hook_calls_;
    }
    bwd_comm += ms_since(t0);
    t0 = Clock::now();
    for (auto it = g.members.rbegin(); it != g.members.rend(); ++it) {
      auto& st = states_[static_cast<std::size_t>(*it)];
      st.work.backward(o_.compute, o_.seed, s, st.full, st.grad.data());
      if (*it == nan_param_ && s == o_.inject_nan_step && rank_ == size_ - 1)
        st.grad[0] = std::numeric_limits<float>::quiet_NaN();
      check_finite(st.grad.data(), st.numel, "gradient", st.name, s);
    }
    bwd_comp += ms_since(t0);
    t0 = Clock::now();
    comm_->group_start();
    for (int si : g.members) {
      auto& st = states_[static_cast<std::size_t>(si)];
      const auto n = static_cast<std::size_t>(st.numel);
      switch (g.kind) {
        case GroupKind::dmuon_site:
          comm_->reduce_avg(st.grad.data(), st.owner == rank_ ? st.grad.data() : nullptr, n,
                            comm::DType::f32, st.owner);
          break;
        case GroupKind::fsdp:
          comm_->reduce_scatter_avg(st.grad.data(), st.grad_shard.data(),
                                    static_cast<std::size_t>(st.chunk), comm::DType::f32);
          break;
        case GroupKind::ddp:
          comm_->all_reduce_avg(st.grad.data(), st.grad.data(), n, comm::DType::f32);
          break;
      }
    }
    pending.push_back(comm_->group_end());
    if (hooked(g) || g.kind == GroupKind::ddp) ++hook_calls_;  // backward-post: reduce
    bwd_comm += ms_since(t0);
  }
  const auto t_wait = Clock::now();
  for (auto& b : pending) b.wait();
  bwd_comm += ms_since(t_wait);
  optimizer(s, ph);
  ph[static_cast<std::size_t>(Phase::step)] = ms_since(t_step);
}

void Runner::optimizer(long s, std::array<double, kPhaseCount>& ph) {
  auto& t_ns = ph[static_cast<std::size_t>(Phase::optimizer_ns)];
  auto& t_other = ph[static_cast<std::size_t>(Phase::optimizer_other)];
  auto& t_exposed = ph[static_cast<std::size_t>(Phase::exposed_comm)];
  const auto& mc = muon_config();
  const auto& ac = adamw_config();
  // fsdp-muon: momentum on the shard, then all-gather the full Nesterov input of every Muon
  // parameter (into its padded grad buffer, no longer needed after the reduce-scatter).
  auto t0 = Clock::now();
  bool gathered_any = false;
  for (auto& st : states_) {
    if (st.storage != Storage::sharded || !st.muon) continue;
    check_finite(st.grad_shard.data(), st.chunk, "gradient", st.name, s);
    // The gathered weights are dead after backward: their first chunk holds the input shard.
    kernels::host::muon_momentum(st.grad_shard.data(), st.momentum.data(), st.gathered.data(),
                                 static_cast<std::size_t>(st.chunk), s, mc.momentum, mc.nesterov);
  }
  const auto t_g = Clock::now();
  comm_->group_start();
  for (auto& st : states_) {
    if (st.storage != Storage::sharded || !st.muon) continue;
    comm_->all_gather(st.gathered.data(), st.grad.data(), static_cast<std::size_t>(st.chunk),
                      comm::DType::f32);
    gathered_any = true;
  }
  comm_->group_end().wait();
  if (gathered_any) t_exposed += ms_since(t_g);
  t_other += ms_since(t0);

  for (auto& st : states_) {
    const auto n = static_cast<std::size_t>(st.numel);
    const auto rows = static_cast<std::size_t>(st.shape.rows),
               cols = static_cast<std::size_t>(st.shape.cols);
    if (st.storage == Storage::remote) continue;
    if (!st.muon) {
      t0 = Clock::now();
      if (st.storage == Storage::sharded) {
        check_finite(st.grad_shard.data(), st.chunk, "gradient", st.name, s);
        kernels::host::adamw_step(st.shard.data(), st.grad_shard.data(), st.exp_avg.data(),
                                  st.exp_avg_sq.data(), static_cast<std::size_t>(st.chunk), s, ac,
                                  st.name);
        check_finite(st.shard.data(), st.chunk, "weight", st.name, s);
      } else {
        check_finite(st.grad.data(), st.numel, "gradient", st.name, s);
        kernels::host::adamw_step(st.master.data(), st.grad.data(), st.exp_avg.data(),
                                  st.exp_avg_sq.data(), n, s, ac, st.name);
        check_finite(st.master.data(), st.numel, "weight", st.name, s);
      }
      t_other += ms_since(t0);
      continue;
    }
    auto& ws = ns_.get(st.shape.rows, st.shape.cols);
    const float scale = kernels::muon_scale(rows, cols);
    float* input = nullptr;
    t0 = Clock::now();
    if (st.storage == Storage::sharded) {
      input = st.grad.data();  // gathered Nesterov input (first numel elements)
    } else {
      check_finite(st.grad.data(), st.numel, "gradient", st.name, s);
      kernels::host::muon_momentum(st.grad.data(), st.momentum.data(), ns_out_.data(), n, s,
                                   mc.momentum, mc.nesterov);
      input = ns_out_.data();
    }
    t_other += ms_since(t0);
    t0 = Clock::now();
    float* out = ns_out_.data() + n;
    kernels::host::newton_schulz(input, out, rows, cols, mc.ns, ws, st.name);
    t_ns += ms_since(t0);
    t0 = Clock::now();
    if (st.storage == Storage::sharded) {
      const std::int64_t begin = static_cast<std::int64_t>(rank_) * st.chunk;
      const std::int64_t len = std::max<std::int64_t>(0, std::min(st.chunk, st.numel - begin));
      if (len > 0)
        kernels::host::muon_apply(st.shard.data(), out + begin, static_cast<std::size_t>(len),
                                  mc.lr, mc.weight_decay, scale);
      check_finite(st.shard.data(), st.chunk, "weight", st.name, s);
    } else {
      kernels::host::muon_apply(st.master.data(), out, n, mc.lr, mc.weight_decay, scale);
      check_finite(st.master.data(), st.numel, "weight", st.name, s);
    }
    t_other += ms_since(t0);
  }
}

std::vector<std::vector<float>> Runner::gather_final() {
  // Each rank writes what it holds (zeros elsewhere); one sum-reduce to rank 0 is exact.
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (const auto& st : states_) {
    offset.push_back(total);
    total += static_cast<std::size_t>(st.numel);
  }
  std::vector<float> mine(total, 0.0f), all(rank_ == 0 ? total : 0);
  for (std::size_t i = 0; i < states_.size(); ++i) {
    const auto& st = states_[i];
    float* dst = mine.data() + offset[i];
    if (st.storage == Storage::owned) std::copy(st.master.begin(), st.master.end(), dst);
    if (st.storage == Storage::replicated && rank_ == 0)
      std::copy(st.master.begin(), st.master.end(), dst);
    if (st.storage == Storage::sharded) {
      const std::int64_t begin = static_cast<std::int64_t>(rank_) * st.chunk;
      for (std::int64_t j = 0; j < st.chunk && begin + j < st.numel; ++j)
        dst[begin + j] = st.shard[static_cast<std::size_t>(j)];
    }
  }
  // Chunked so counts stay below INT_MAX.
  const std::size_t max_chunk = std::size_t{1} << 28;
  for (std::size_t off = 0; off < total; off += max_chunk) {
    const int cnt = static_cast<int>(std::min(max_chunk, total - off));
    MPI_Reduce(mine.data() + off, rank_ == 0 ? all.data() + off : nullptr, cnt, MPI_FLOAT, MPI_SUM,
               0, world_);
  }
  std::vector<std::vector<float>> out;
  if (rank_ == 0)
    for (std::size_t i = 0; i < states_.size(); ++i)
      out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(offset[i]),
                       all.begin() + static_cast<std::ptrdiff_t>(
                                         offset[i] + static_cast<std::size_t>(states_[i].numel)));
  return out;
}

// Per-rank values to rank 0: the measured steps' phases (steps x ranks x phases) and the last
// step's calls, measured and formula bytes per kind (kinds x ranks).
void Runner::gather_per_rank(const std::vector<double>& phases,
                             const std::array<std::int64_t, comm::kCollectiveKindCount>& calls,
                             const std::array<std::int64_t, comm::kCollectiveKindCount>& bytes,
                             const VolumeExpectation& expect, RunResult& r) {
  const std::size_t np = kPhaseCount, nk = comm::kCollectiveKindCount;
  const auto steps = static_cast<std::size_t>(o_.steps), ranks = static_cast<std::size_t>(size_);
  const std::vector<double> mine(phases.begin() + static_cast<long>(o_.warmup * np), phases.end());
  std::vector<double> all(rank_ == 0 ? mine.size() * ranks : 0);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
             static_cast<int>(mine.size()), MPI_DOUBLE, 0, world_);
  std::vector<std::int64_t> cnt;
  for (std::size_t i = 0; i < nk; ++i) {
    cnt.push_back(calls[i]);
    cnt.push_back(bytes[i]);
    cnt.push_back(expect[i].bytes);
  }
  std::vector<std::int64_t> allc(rank_ == 0 ? cnt.size() * ranks : 0);
  MPI_Gather(cnt.data(), static_cast<int>(cnt.size()), MPI_INT64_T, allc.data(),
             static_cast<int>(cnt.size()), MPI_INT64_T, 0, world_);
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

RunResult Runner::run() {
  RunResult r;
  r.method = o_.method;
  r.reshard = plan::reshard_name(o_.reshard);
  r.world_size = size_;
  r.replicate = 1;
  const bool dm = o_.method == Method::dmuon;
  const auto predicted =
      plan::predict_dmuon_volume(tree_, plan_.hooks, plan_.partition, o_.reshard);
  const auto expect = expected_volume(o_.method, o_.reshard, tree_, plan_, predicted, rank_, size_);
  const int total = o_.total_steps();
  std::vector<double> phases(static_cast<std::size_t>(total) * kPhaseCount, 0.0);
  std::int64_t hooks_per_step = 0;
  std::array<std::int64_t, comm::kCollectiveKindCount> calls{}, bytes{};
  std::string audit_msg;
  for (long s = 1; s <= total; ++s) {
    std::array<double, kPhaseCount> ph{};
    const auto before = comm_->counters().snapshot();
    const auto hooks_before = hook_calls_;
    step(s, ph);
    ph[static_cast<std::size_t>(Phase::exposed_comm)] +=
        ph[static_cast<std::size_t>(Phase::forward_comm)] +
        ph[static_cast<std::size_t>(Phase::backward_comm)];
    const auto diff = comm_->counters() - before;
    hooks_per_step = hook_calls_ - hooks_before;
    std::copy(ph.begin(), ph.end(), phases.begin() + (s - 1) * static_cast<long>(kPhaseCount));
    for (auto k : comm::kAllCollectiveKinds) {
      const auto i = static_cast<std::size_t>(k);
      calls[i] = static_cast<std::int64_t>(diff[k].calls);
      bytes[i] = static_cast<std::int64_t>(diff.volume(k));
      if (audit_msg.empty() && (calls[i] != expect[i].calls || bytes[i] != expect[i].bytes))
        audit_msg = fmt::format(
            "rank {} step {} {}: measured {} calls / {} bytes, formula {} calls / {} bytes", rank_,
            s, comm::collective_kind_name(k), calls[i], bytes[i], expect[i].calls, expect[i].bytes);
    }
    if (dm && audit_msg.empty() && hooks_per_step != predicted.hook_calls)
      audit_msg = fmt::format("rank {} step {}: {} hook calls, formula {}", rank_, s,
                              hooks_per_step, predicted.hook_calls);
    if (o_.on_step) o_.on_step(static_cast<int>(s), total);
  }
  gather_per_rank(phases, calls, bytes, expect, r);
  // Reductions over ranks (outside the counted communicator).
  std::vector<double> maxph(phases.size());
  MPI_Allreduce(phases.data(), maxph.data(), static_cast<int>(phases.size()), MPI_DOUBLE, MPI_MAX,
                world_);
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    std::vector<double> v;
    for (int s = o_.warmup; s < total; ++s)
      v.push_back(maxph[static_cast<std::size_t>(s) * kPhaseCount + p]);
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    r.phases_ms[p] = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  std::int64_t packed = 0, master = 0, mom = 0;
  for (const auto& g : groups_)
    packed =
        o_.reshard == plan::Reshard::z3 ? std::max(packed, g.live_bytes) : packed + g.live_bytes;
  for (const auto& st : states_) {
    master += static_cast<std::int64_t>(4 * (st.master.size() + st.shard.size()));
    mom += static_cast<std::int64_t>(
        4 * (st.momentum.size() + st.exp_avg.size() + st.exp_avg_sq.size()));
  }
  std::vector<std::int64_t> loc = {hooks_per_step, packed, master, mom};
  for (std::size_t i = 0; i < comm::kCollectiveKindCount; ++i) {
    loc.push_back(calls[i]);
    loc.push_back(bytes[i]);
    loc.push_back(expect[i].bytes);
  }
  loc.push_back(audit_msg.empty() ? 0 : 1);
  std::vector<std::int64_t> mx(loc.size());
  MPI_Allreduce(loc.data(), mx.data(), static_cast<int>(loc.size()), MPI_INT64_T, MPI_MAX, world_);
  r.hook_calls_per_step = mx[0];
  r.peak_packed_bytes = mx[1];
  r.master_bytes = mx[2];
  r.momentum_bytes = mx[3];
  for (std::size_t i = 0; i < comm::kCollectiveKindCount; ++i) {
    r.kinds[i].calls_per_step = mx[4 + 3 * i];
    r.kinds[i].bytes_measured = mx[5 + 3 * i];
    r.kinds[i].bytes_formula = mx[6 + 3 * i];
  }
  r.audit_ok = mx.back() == 0;
  if (!r.audit_ok) {
    // The lowest failing rank's message, to every rank.
    int mine = audit_msg.empty() ? size_ : rank_, first = 0;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world_);
    int len = rank_ == first ? static_cast<int>(audit_msg.size()) : 0;
    MPI_Bcast(&len, 1, MPI_INT, first, world_);
    audit_msg.resize(static_cast<std::size_t>(len));
    MPI_Bcast(audit_msg.data(), len, MPI_CHAR, first, world_);
    r.audit_message = audit_msg;
  }
  r.hook_sites = dm ? static_cast<std::int64_t>(plan_.hooks.sites.size())
                    : static_cast<std::int64_t>(groups_.size());
  r.hook_calls_formula = dm ? predicted.hook_calls : r.hook_calls_per_step;
  r.final_weights = gather_final();
  if (o_.check) {
    r.checked = true;
    double err = 0;
    if (rank_ == 0) {
      const auto ref = reference_weights(tree_, plan_, o_, size_);
      err = max_relative_error(tree_, r.final_weights, ref, &r.worst_param);
    }
    // The other ranks wait politely: with oversubscribed ranks a spinning MPI_Bcast would take
    // the cores rank 0 needs for the reference.
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibcast(&err, 1, MPI_DOUBLE, 0, world_, &req);
    for (int done = 0; !done;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    r.max_rel_error = err;
    r.check_passed = err <= o_.check_tolerance;
  }
  return r;
}

}  // namespace

RunResult run_engine(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                     MPI_Comm world) {
  int size = 1;
  MPI_Comm_size(world, &size);
  validate_run(tree, plan, o, size);
  comm::verify_same_on_all_ranks(plan::plan_hash(tree, plan), "DMuon plan", world);
  Runner runner(tree, plan, o, world);
  return runner.run();
}

}  // namespace dmuon::engine
