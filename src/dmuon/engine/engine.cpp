#include "dmuon/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <thread>

#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/comm/rank_layout.hpp"
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

std::string channel_name(std::size_t channel) {
  const std::string kind = comm::collective_kind_name(channel_kind(channel));
  return channel_group(channel) == CommGroup::shard ? kind : "replicate_" + kind;
}

void validate_run(const model::ModuleTree& tree, const plan::Plan& plan, const EngineOptions& o,
                  int world_size) {
  validate(o, world_size);
  const auto& po = plan.partition.options;
  if (po.replicate < 1 || po.shard * po.replicate != world_size)
    throw InputError(fmt::format("plan laid out for {} x {} ranks, run on {} (re-plan for {})",
                                 po.replicate, po.shard, world_size, world_size));
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

// Where a parameter lives on this rank.
//   owned   dmuon: this rank owns it (fp32 master + momentum; runs Muon on it)
//   column  dmuon HSDP: another row's rank of the owner's column owns it; this rank keeps a
//           master copy (refreshed by the owner's post-step broadcast), roots this row's
//           broadcast and stage-1 reduce
//   remote  dmuon: only the packed copy received for compute
//   sharded FSDP: 1/G of it (padded) in this row; replicated in every row
//   replicated  ddp: everything everywhere
enum class Storage { owned, column, remote, sharded, replicated };
enum class GroupKind { fsdp, dmuon_site, ddp };

struct ParamState {
  int pid = -1;
  std::string name;
  MatrixShape shape;
  std::int64_t numel = 0;
  std::int64_t chunk = 0;  // sharded: elements per rank of the row
  Storage storage = Storage::replicated;
  bool muon = false;
  int owner = -1;               // dmuon dedicated: world rank of the owner
  float* full = nullptr;        // full weights used by compute
  float* grad = nullptr;        // numel (sharded: G·chunk padded)
  std::vector<float> master;    // owned/column/replicated: numel
  std::vector<float> shard;     // sharded: chunk
  std::vector<float> gathered;  // sharded: G·chunk
  std::vector<float> momentum, exp_avg, exp_avg_sq;
  std::vector<float> grad_store;  // grad's storage, unless it lives in a packed buffer
  std::vector<float> grad_shard;  // sharded: chunk
  LinearWork work;
};

// One (site, owner) pair of a DMuon site: the owner's parameters, packed in model order.
struct PackedBuffer {
  int owner = -1;               // world rank
  int owner_column = 0;         // rank in the row of the broadcast/stage-1 root (owner's column)
  int owner_row = 0;            // rank in the column of the stage-2 / replicate root (owner's row)
  std::vector<int> members;     // indices into states
  std::vector<float> data;      // weights
  std::vector<float> grad;      // gradients, same layout (one message with GradReduce::packed)
  comm::Batch replica;          // HSDP: the owner's post-step master broadcast, waited at forward
  bool replica_unread = false;  // data holds a replica broadcast not yet copied to the masters
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
      : tree_(tree), plan_(plan), o_(o), layout_(world, plan.partition.options.replicate) {
    world_ = world;
    rank_ = layout_.world_rank();
    size_ = layout_.world_size();
    if (o_.method == Method::ddp_muon) {
      // DDP has no shards: one all-reduce over every rank, whatever the layout.
      row_ = comm::make_communicator(comm::Backend::mpi, world);
    } else {
      row_ = comm::make_communicator(comm::Backend::mpi, layout_.shard_comm());
      if (layout_.replicate_size() > 1)
        col_ = comm::make_communicator(comm::Backend::mpi, layout_.replicate_comm());
    }
    shard_ = o_.method == Method::ddp_muon ? size_ : layout_.shard_size();
    column_ = o_.method == Method::ddp_muon ? rank_ : layout_.column();
    row_index_ = o_.method == Method::ddp_muon ? 0 : layout_.row();
    build();
  }

  RunResult run();

 private:
  void build();
  void step(long s, std::array<double, kPhaseCount>& ph);
  comm::Batch issue_weights(Group& g);
  comm::Batch issue_reduce(Group& g);
  comm::Batch issue_stage2(Group& g);
  void reduce_gradients(comm::Communicator& c, PackedBuffer& b, int root);
  void issue_replicas();
  void take_replica(PackedBuffer& b);
  void pack_master(PackedBuffer& b);
  void optimizer(long s, std::array<double, kPhaseCount>& ph);
  void check_finite(const float* x, std::int64_t n, const std::string& what,
                    const std::string& name, long s) const {
    if (kernels::host::count_non_finite(x, static_cast<std::size_t>(n)) != 0)
      comm::abort_all(fmt::format("non-finite {} in parameter '{}' at step {}", what, name, s));
  }
  std::vector<std::vector<float>> gather_final();
  void gather_per_rank(const std::vector<double>& phases,
                       const std::array<std::int64_t, kChannelCount>& calls,
                       const std::array<std::int64_t, kChannelCount>& bytes,
                       const VolumeExpectation& expect, RunResult& r);
  std::int64_t peak_packed_bytes() const;
  // Hook sites whose pre/post-forward hooks run: DMuon sites; FSDP units of the fsdp methods
  // (dmuon's non-dedicated unit is not a DMuon hook site). DDP has post-backward hooks only.
  bool hooked(const Group& g) const {
    return g.kind == GroupKind::dmuon_site ||
           (g.kind == GroupKind::fsdp && o_.method != Method::dmuon);
  }

  const model::ModuleTree& tree_;
  const plan::Plan& plan_;
  EngineOptions o_;
  comm::RankLayout layout_;
  MPI_Comm world_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int shard_ = 1;                            // G: ranks of the shard group (row)
  int column_ = 0;                           // this rank's index in its row
  int row_index_ = 0;                        // this rank's row
  std::unique_ptr<comm::Communicator> row_;  // shard group (ddp: every rank)
  std::unique_ptr<comm::Communicator> col_;  // replicate group; null unless HSDP
  std::vector<ParamState> states_;
  std::vector<Group> groups_;
  NsWorkspaces ns_;
  std::vector<float> ns_out_;
  std::int64_t hook_calls_ = 0;
  int nan_param_ = -1;  // index into states_ poisoned by --inject-nan-step
};

void Runner::build() {
  const Method m = o_.method;
  const int G = shard_;
  const std::int64_t global = o_.global_samples(size_);
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
    if (m == Method::ddp_muon) {
      st.storage = Storage::replicated;
    } else if (m == Method::dmuon && dedicated) {
      st.owner = plan_.partition.owner_rank(pid);
      st.storage = st.owner == rank_         ? Storage::owned
                   : st.owner % G == column_ ? Storage::column
                                             : Storage::remote;
    } else {
      st.storage = Storage::sharded;
    }
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
        break;
      case Storage::column: st.master = init; break;
      case Storage::remote: break;
      case Storage::replicated:
        st.master = init;
        st.full = st.master.data();
        st.grad_store.assign(n, 0.0f);
        zero_optimizer_state(n);
        break;
      case Storage::sharded: {
        st.chunk = shard_chunk(st.numel, G);
        const auto c = static_cast<std::size_t>(st.chunk);
        st.shard.assign(c, 0.0f);
        for (std::size_t j = 0; j < c; ++j) {
          const std::size_t gi = static_cast<std::size_t>(column_) * c + j;
          if (gi < n) st.shard[j] = init[gi];
        }
        st.gathered.assign(c * static_cast<std::size_t>(G), 0.0f);
        st.full = st.gathered.data();
        st.grad_store.assign(c * static_cast<std::size_t>(G), 0.0f);
        st.grad_shard.assign(c, 0.0f);
        zero_optimizer_state(c);
        break;
      }
    }
    if (!st.grad_store.empty()) st.grad = st.grad_store.data();
    st.work = LinearWork(tree_, pid, global, rank_, size_);
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
          PackedBuffer b;
          b.owner = owner;
          b.owner_column = owner % G;
          b.owner_row = owner / G;
          g.packed.push_back(std::move(b));
        }
        g.packed[it->second].members.push_back(si);
      }
      for (auto& b : g.packed) {
        std::size_t total = 0;
        for (int si : b.members)
          total += static_cast<std::size_t>(states_[static_cast<std::size_t>(si)].numel);
        b.data.assign(total, 0.0f);
        b.grad.assign(total, 0.0f);
        std::size_t off = 0;
        for (int si : b.members) {
          auto& st = states_[static_cast<std::size_t>(si)];
          st.full = b.data.data() + off;  // compute reads the packed copy, also on the owner
          st.grad = b.grad.data() + off;
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

void Runner::pack_master(PackedBuffer& b) {
  std::vector<kernels::ConstSlice> parts;
  parts.reserve(b.members.size());
  for (int si : b.members) {
    const auto& st = states_[static_cast<std::size_t>(si)];
    parts.push_back({st.master.data(), static_cast<std::size_t>(st.numel)});
  }
  kernels::host::pack(parts.data(), parts.size(), b.data.data(), b.data.size());
}

// HSDP: completes the owner's post-step broadcast of b (waits if still in flight); b.data holds
// the updated packed master on every rank of the owner's column, which refresh their copies.
void Runner::take_replica(PackedBuffer& b) {
  b.replica.wait();
  b.replica_unread = false;
  if (b.owner == rank_) return;
  std::vector<kernels::Slice> parts;
  parts.reserve(b.members.size());
  for (int si : b.members) {
    auto& st = states_[static_cast<std::size_t>(si)];
    parts.push_back({st.master.data(), static_cast<std::size_t>(st.numel)});
  }
  kernels::host::unpack(b.data.data(), b.data.size(), parts.data(), parts.size());
}

// Forward-pre (and Z3 backward-pre): the packed broadcasts of a site, rooted in each owner's
// column of this row, or the FSDP all-gathers of a unit. In flight on return.
comm::Batch Runner::issue_weights(Group& g) {
  if (g.kind == GroupKind::ddp) return {};
  if (g.kind == GroupKind::dmuon_site) {
    for (auto& b : g.packed) {
      if (b.owner_column != column_) continue;
      if (b.replica_unread)
        take_replica(b);  // b.data already holds the packed master
      else
        pack_master(b);
    }
    row_->group_start();
    for (auto& b : g.packed)
      row_->broadcast(b.data.data(), b.data.size(), comm::DType::f32, b.owner_column);
    return row_->group_end();
  }
  row_->group_start();
  for (int si : g.members) {
    auto& st = states_[static_cast<std::size_t>(si)];
    row_->all_gather(st.shard.data(), st.gathered.data(), static_cast<std::size_t>(st.chunk),
                     comm::DType::f32);
  }
  return row_->group_end();
}

// One owner's gradients of a site, averaged into `root` of `c` (in place there): one reduce per
// parameter, or one over the packed buffer.
void Runner::reduce_gradients(comm::Communicator& c, PackedBuffer& b, int root) {
  const bool at_root = c.rank() == root;
  if (o_.grad_reduce == plan::GradReduce::packed) {
    c.reduce_avg(b.grad.data(), at_root ? b.grad.data() : nullptr, b.grad.size(), comm::DType::f32,
                 root);
    return;
  }
  for (int si : b.members) {
    auto& st = states_[static_cast<std::size_t>(si)];
    c.reduce_avg(st.grad, at_root ? st.grad : nullptr, static_cast<std::size_t>(st.numel),
                 comm::DType::f32, root);
  }
}

// Backward-post: gradients to their owners' column (reduce AVG, per parameter or per packed
// buffer), reduce-scatter of FSDP units, or the DDP all-reduce.
comm::Batch Runner::issue_reduce(Group& g) {
  row_->group_start();
  if (g.kind == GroupKind::dmuon_site) {
    for (auto& b : g.packed) reduce_gradients(*row_, b, b.owner_column);
  } else {
    // Model order within the group (the same order on every rank).
    for (int si : g.members) {
      auto& st = states_[static_cast<std::size_t>(si)];
      if (g.kind == GroupKind::fsdp)
        row_->reduce_scatter_avg(st.grad, st.grad_shard.data(), static_cast<std::size_t>(st.chunk),
                                 comm::DType::f32);
      else
        row_->all_reduce_avg(st.grad, st.grad, static_cast<std::size_t>(st.numel),
                             comm::DType::f32);
    }
  }
  return row_->group_end();
}

// HSDP, after a group's stage 1 completed: the owner's column reduces the row means to the
// owner (stage 2); FSDP units all-reduce their gradient shard across the replicas.
comm::Batch Runner::issue_stage2(Group& g) {
  col_->group_start();
  if (g.kind == GroupKind::dmuon_site) {
    for (auto& b : g.packed)
      if (b.owner_column == column_) reduce_gradients(*col_, b, b.owner_row);
  } else if (g.kind == GroupKind::fsdp) {
    for (int si : g.members) {
      auto& st = states_[static_cast<std::size_t>(si)];
      col_->all_reduce_avg(st.grad_shard.data(), st.grad_shard.data(),
                           static_cast<std::size_t>(st.chunk), comm::DType::f32);
    }
  }
  return col_->group_end();
}

// HSDP, after the update: each owner sends its new fp32 master (packed per site) to the other
// rows of its column. Waited at the site's next forward (take_replica).
void Runner::issue_replicas() {
  for (auto& g : groups_)
    for (auto& b : g.packed) {
      if (b.owner_column != column_) continue;
      if (b.owner == rank_) pack_master(b);
      col_->group_start();
      col_->broadcast(b.data.data(), b.data.size(), comm::DType::f32, b.owner_row);
      b.replica = col_->group_end();
      b.replica_unread = true;
    }
}

void Runner::step(long s, std::array<double, kPhaseCount>& ph) {
  const bool z3 = o_.reshard == plan::Reshard::z3;
  auto& fwd_comm = ph[static_cast<std::size_t>(Phase::forward_comm)];
  auto& fwd_comp = ph[static_cast<std::size_t>(Phase::forward_compute)];
  auto& bwd_comp = ph[static_cast<std::size_t>(Phase::backward_compute)];
  auto& bwd_comm = ph[static_cast<std::size_t>(Phase::backward_comm)];
  const auto t_step = Clock::now();
  const std::size_t n = groups_.size();
  const auto depth = static_cast<std::size_t>(o_.prefetch);
  // Groups in the order of the current pass (forward; reversed for backward).
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  // Weight collectives in flight, oldest first: groups order[issued - ahead.size() .. issued).
  std::deque<comm::Batch> ahead;
  std::size_t issued = 0;
  auto weights_ready = [&](std::size_t k) {
    for (; issued < n && issued <= k + depth; ++issued)
      ahead.push_back(issue_weights(groups_[order[issued]]));
    ahead.front().wait();
    ahead.pop_front();
  };
  // Gradient collectives, by group; backward has issued stage 1 of groups order[0 ..
  // stage1_issued) and stage 2 (HSDP) of order[0 .. stage2_issued). A stage 2 is issued once
  // its stage 1 is done, strictly in backward order: collectives on one communicator must come
  // in the same order on every rank of the column, whatever finished first where.
  std::vector<comm::Batch> stage1(n), stage2(n);
  std::size_t stage1_issued = 0, stage2_issued = 0;
  // Gradient and (HSDP) replicate batches that may still be in flight: only these are polled,
  // so polling costs nothing per finished group. The batches do not move during the step.
  std::vector<comm::Batch*> in_flight;
  for (auto& g : groups_)
    for (auto& b : g.packed)
      if (b.replica.pending()) in_flight.push_back(&b.replica);
  auto advance_stage2 = [&](bool block) {
    while (col_ && stage2_issued < stage1_issued) {
      const std::size_t i = order[stage2_issued];
      if (block)
        stage1[i].wait();
      else if (!stage1[i].ready())
        return;
      stage2[i] = issue_stage2(groups_[i]);
      in_flight.push_back(&stage2[i]);
      ++stage2_issued;
    }
  };
  // MPI moves nonblocking collectives only inside MPI calls: polling the in-flight batches
  // between parameters lets them advance while this rank computes (overlap, not just issue).
  auto progress = [&] {
    for (auto& b : ahead) b.ready();
    advance_stage2(false);
    in_flight.erase(std::remove_if(in_flight.begin(), in_flight.end(),
                                   [](comm::Batch* b) { return b->ready(); }),
                    in_flight.end());
  };
  // Forward, groups in order.
  for (std::size_t k = 0; k < n; ++k) {
    auto& g = groups_[k];
    auto t0 = Clock::now();
    weights_ready(k);
    if (hooked(g)) ++hook_calls_;  // forward-pre: broadcast / all-gather
    fwd_comm += ms_since(t0);
    t0 = Clock::now();
    for (int si : g.members) {
      auto& st = states_[static_cast<std::size_t>(si)];
      st.work.forward(o_.compute, o_.seed, s, st.full);
      progress();
    }
    fwd_comp += ms_since(t0);
    if (z3 && hooked(g)) ++hook_calls_;  // forward-post: free
  }
  // Backward, groups in reverse; each group's gradient collectives stay in flight while the
  // next groups compute.
  std::reverse(order.begin(), order.end());
  issued = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order[k];
    auto& g = groups_[i];
    auto t0 = Clock::now();
    if (z3) {
      weights_ready(k);  // Z3: re-broadcast / re-gather before backward
      if (hooked(g)) ++hook_calls_;
    }
    bwd_comm += ms_since(t0);
    t0 = Clock::now();
    for (auto it = g.members.rbegin(); it != g.members.rend(); ++it) {
      auto& st = states_[static_cast<std::size_t>(*it)];
      st.work.backward(o_.compute, o_.seed, s, st.full, st.grad);
      if (*it == nan_param_ && s == o_.inject_nan_step && rank_ == size_ - 1)
        st.grad[0] = std::numeric_limits<float>::quiet_NaN();
      check_finite(st.grad, st.numel, "gradient", st.name, s);
      progress();
    }
    bwd_comp += ms_since(t0);
    t0 = Clock::now();
    stage1[i] = issue_reduce(g);
    in_flight.push_back(&stage1[i]);
    ++stage1_issued;
    if (hooked(g) || g.kind == GroupKind::ddp) ++hook_calls_;  // backward-post: reduce
    advance_stage2(false);
    bwd_comm += ms_since(t0);
  }
  const auto t_wait = Clock::now();
  advance_stage2(true);
  for (auto& b : stage1) b.wait();
  for (auto& b : stage2) b.wait();
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
  row_->group_start();
  for (auto& st : states_) {
    if (st.storage != Storage::sharded || !st.muon) continue;
    row_->all_gather(st.gathered.data(), st.grad, static_cast<std::size_t>(st.chunk),
                     comm::DType::f32);
    gathered_any = true;
  }
  row_->group_end().wait();
  if (gathered_any) t_exposed += ms_since(t_g);
  t_other += ms_since(t0);

  for (auto& st : states_) {
    const auto n = static_cast<std::size_t>(st.numel);
    const auto rows = static_cast<std::size_t>(st.shape.rows),
               cols = static_cast<std::size_t>(st.shape.cols);
    if (st.storage == Storage::remote || st.storage == Storage::column) continue;
    if (!st.muon) {
      t0 = Clock::now();
      if (st.storage == Storage::sharded) {
        check_finite(st.grad_shard.data(), st.chunk, "gradient", st.name, s);
        kernels::host::adamw_step(st.shard.data(), st.grad_shard.data(), st.exp_avg.data(),
                                  st.exp_avg_sq.data(), static_cast<std::size_t>(st.chunk), s, ac,
                                  st.name);
        check_finite(st.shard.data(), st.chunk, "weight", st.name, s);
      } else {
        check_finite(st.grad, st.numel, "gradient", st.name, s);
        kernels::host::adamw_step(st.master.data(), st.grad, st.exp_avg.data(),
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
      input = st.grad;  // gathered Nesterov input (first numel elements)
    } else {
      check_finite(st.grad, st.numel, "gradient", st.name, s);
      kernels::host::muon_momentum(st.grad, st.momentum.data(), ns_out_.data(), n, s, mc.momentum,
                                   mc.nesterov);
      input = ns_out_.data();
    }
    t_other += ms_since(t0);
    t0 = Clock::now();
    float* out = ns_out_.data() + n;
    kernels::host::newton_schulz(input, out, rows, cols, mc.ns, ws, st.name);
    t_ns += ms_since(t0);
    t0 = Clock::now();
    if (st.storage == Storage::sharded) {
      const std::int64_t begin = static_cast<std::int64_t>(column_) * st.chunk;
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
  if (col_) {
    t0 = Clock::now();
    issue_replicas();
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
    if (st.storage == Storage::sharded && row_index_ == 0) {  // every row holds the same
      const std::int64_t begin = static_cast<std::int64_t>(column_) * st.chunk;
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
// step's calls, measured and formula bytes per channel (channels x ranks).
void Runner::gather_per_rank(const std::vector<double>& phases,
                             const std::array<std::int64_t, kChannelCount>& calls,
                             const std::array<std::int64_t, kChannelCount>& bytes,
                             const VolumeExpectation& expect, RunResult& r) {
  const std::size_t np = kPhaseCount, nk = kChannelCount;
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

// Packed/gathered buffers a real implementation holds live: Z3 the groups in flight at once
// (the one computing and `prefetch` ahead), Z2 all of them (kept from forward to backward).
std::int64_t Runner::peak_packed_bytes() const {
  std::int64_t peak = 0, all = 0;
  const std::size_t window = static_cast<std::size_t>(o_.prefetch) + 1;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    all += groups_[i].live_bytes;
    std::int64_t w = 0;
    for (std::size_t j = i; j < std::min(groups_.size(), i + window); ++j)
      w += groups_[j].live_bytes;
    peak = std::max(peak, w);
  }
  return o_.reshard == plan::Reshard::z3 ? peak : all;
}

RunResult Runner::run() {
  RunResult r;
  r.method = o_.method;
  r.reshard = plan::reshard_name(o_.reshard);
  r.world_size = size_;
  r.replicate = layout_.replicate_size();
  const bool dm = o_.method == Method::dmuon;
  const auto predicted =
      plan::predict_dmuon_volume(tree_, plan_.hooks, plan_.partition, o_.reshard, o_.grad_reduce);
  const auto expect = expected_volume(o_.method, o_.reshard, tree_, plan_, predicted, rank_,
                                      layout_.shard_size(), layout_.replicate_size());
  const int total = o_.total_steps();
  std::vector<double> phases(static_cast<std::size_t>(total) * kPhaseCount, 0.0);
  std::int64_t hooks_per_step = 0;
  std::array<std::int64_t, kChannelCount> calls{}, bytes{};
  std::string audit_msg;
  const comm::CollectiveCounters none;
  auto counters = [&](CommGroup g) -> const comm::CollectiveCounters& {
    if (g == CommGroup::shard) return row_->counters();
    return col_ ? col_->counters() : none;
  };
  for (long s = 1; s <= total; ++s) {
    std::array<double, kPhaseCount> ph{};
    const auto before_row = counters(CommGroup::shard);
    const auto before_col = counters(CommGroup::replicate);
    const auto hooks_before = hook_calls_;
    step(s, ph);
    ph[static_cast<std::size_t>(Phase::exposed_comm)] +=
        ph[static_cast<std::size_t>(Phase::forward_comm)] +
        ph[static_cast<std::size_t>(Phase::backward_comm)];
    const auto diff_row = counters(CommGroup::shard) - before_row;
    const auto diff_col = counters(CommGroup::replicate) - before_col;
    hooks_per_step = hook_calls_ - hooks_before;
    std::copy(ph.begin(), ph.end(), phases.begin() + (s - 1) * static_cast<long>(kPhaseCount));
    for (std::size_t c = 0; c < kChannelCount; ++c) {
      const auto& diff = channel_group(c) == CommGroup::shard ? diff_row : diff_col;
      const auto k = channel_kind(c);
      calls[c] = static_cast<std::int64_t>(diff[k].calls);
      bytes[c] = static_cast<std::int64_t>(diff.volume(k));
      if (audit_msg.empty() && (calls[c] != expect[c].calls || bytes[c] != expect[c].bytes))
        audit_msg = fmt::format(
            "rank {} step {} {}: measured {} calls / {} bytes, formula {} calls / {} bytes", rank_,
            s, channel_name(c), calls[c], bytes[c], expect[c].calls, expect[c].bytes);
    }
    if (dm && audit_msg.empty() && hooks_per_step != predicted.hook_calls)
      audit_msg = fmt::format("rank {} step {}: {} hook calls, formula {}", rank_, s,
                              hooks_per_step, predicted.hook_calls);
    if (o_.on_step) o_.on_step(static_cast<int>(s), total);
  }
  // The last step's replicate broadcasts complete before the weights are read.
  for (auto& g : groups_)
    for (auto& b : g.packed)
      if (b.replica_unread) take_replica(b);
  gather_per_rank(phases, calls, bytes, expect, r);
  // Reductions over ranks (outside the counted communicators).
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
  std::int64_t master = 0, mom = 0;
  for (const auto& st : states_) {
    master += static_cast<std::int64_t>(4 * (st.master.size() + st.shard.size()));
    mom += static_cast<std::int64_t>(
        4 * (st.momentum.size() + st.exp_avg.size() + st.exp_avg_sq.size()));
  }
  std::vector<std::int64_t> loc = {hooks_per_step, peak_packed_bytes(), master, mom};
  for (std::size_t i = 0; i < kChannelCount; ++i) {
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
  for (std::size_t i = 0; i < kChannelCount; ++i) {
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
