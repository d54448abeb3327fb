#include "dmuon/project/world_programs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "dmuon/base/ordered_parallel.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "dmuon/project/compute_contention.hpp"
#include "dmuon/project/reduced_layout.hpp"
#include "dmuon/project/sample_classes.hpp"

namespace dmuon::project {

using engine::Op;
using engine::StepLayout;

const char* symmetry_name(Symmetry s) {
  return s == Symmetry::full ? "full" : "reduced";
}

namespace {

// Seconds of one compute op of `L` on a rank of sample class `cls`. Aggregate parameters of a
// reduced layout cost the group's total over the reference layout minus the members kept.
class Durations {
 public:
  Durations(const OpCost& cost, const SampleClasses& samples) : cost_(cost), samples_(samples) {}

  // Per-group totals of forward / backward over `ref`'s members (DMuon sites), for `cls`.
  void set_reference(const StepLayout* ref) { ref_ = ref; }
  // Computes the totals of every (class, micro-step): afterwards the durations are read-only,
  // and may be asked from several threads. Needed before an aggregate's duration is asked.
  void fill_totals(int classes, int accum) {
    accum_ = accum;
    totals_.assign(static_cast<std::size_t>(classes) * static_cast<std::size_t>(accum), {});
    for (int cls = 0; cls < classes; ++cls)
      for (int micro = 0; micro < accum; ++micro) {
        auto& t = totals_[index(cls, micro)];
        t.assign(ref_->groups.size(), {0.0, 0.0});
        for (std::size_t g = 0; g < ref_->groups.size(); ++g)
          for (int pi : ref_->groups[g].members) {
            const auto& p = ref_->params[static_cast<std::size_t>(pi)];
            t[g][0] += one(p, cls, micro, true);
            t[g][1] += one(p, cls, micro, false);
          }
      }
  }

  // `reference`: for a reduced layout, ReducedLayout::reference (-1 marks the aggregates, so
  // that an aggregate's op need not read its parameter: 15,000 of them, 232 bytes each).
  double operator()(const StepLayout& L, int cls, const engine::StepOp& op,
                    const std::vector<int>* reference = nullptr) const {
    switch (op.op) {
      case Op::pack: return cost_.pack(L, op.group);
      case Op::clip_partial: return cost_.clip_partial(L);
      case Op::clip_scale: return cost_.clip_scale(L);
      case Op::act_forward:
      case Op::act_recompute:
      case Op::act_backward: return cost_.activation(L, op);
      case Op::prepare: return cost_.prepare(L, op.group);
      case Op::forward:
      case Op::backward: {
        const bool fwd = op.op == Op::forward;
        const auto param = static_cast<std::size_t>(op.param);
        if (reference == nullptr || (*reference)[param] >= 0) {
          const auto& p = L.params[param];
          if (!is_aggregate(p)) return one(p, cls, op.micro, fwd);
        }
        const auto& members = L.groups[static_cast<std::size_t>(op.group)].members;
        if (members.size() == 1) return std::max(0.0, total(cls, op.micro, op.group, fwd));
        double kept = 0;
        for (int pi : members) {
          const auto& q = L.params[static_cast<std::size_t>(pi)];
          if (!is_aggregate(q)) kept += one(q, cls, op.micro, fwd);
        }
        return std::max(0.0, total(cls, op.micro, op.group, fwd) - kept);
      }
      case Op::newton_schulz:
        return cost_.newton_schulz(L.params[static_cast<std::size_t>(op.param)]);
      case Op::apply: {
        const auto& p = L.params[static_cast<std::size_t>(op.param)];
        return cost_.apply(p, L.shard_member(p));
      }
      default: return 0;
    }
  }

 private:
  double one(const engine::ParamLayout& p, int cls, int micro, bool fwd) const {
    const std::int64_t local = samples_.local(p.pid, cls, micro);
    return fwd ? cost_.forward(p, local) : cost_.backward(p, local);
  }

  std::size_t index(int cls, int micro) const {
    return static_cast<std::size_t>(cls) * static_cast<std::size_t>(accum_) +
           static_cast<std::size_t>(micro);
  }

  double total(int cls, int micro, int group, bool fwd) const {
    return totals_.at(index(cls, micro))[static_cast<std::size_t>(group)][fwd ? 0 : 1];
  }

  const OpCost& cost_;
  const SampleClasses& samples_;
  const StepLayout* ref_ = nullptr;
  int accum_ = 1;
  std::vector<std::vector<std::array<double, 2>>> totals_;  // by (cls, micro): index()
};

// What a rank's layout adds to the world's memory figures (maxima over ranks).
struct RankMemoryFacts {
  std::int64_t packed_bytes = 0, master_bytes = 0, state_bytes = 0;
  RankMemory memory;
};

RankMemoryFacts memory_facts(const StepLayout& L) {
  return {L.live_weight_bytes, L.master_elems * 4, (L.state_elems + L.second_state_elems) * 4,
          memory_of(L)};
}

void account_memory(WorldPrograms& w, const RankMemoryFacts& f) {
  w.peak_packed_bytes = std::max(w.peak_packed_bytes, f.packed_bytes);
  w.master_bytes = std::max(w.master_bytes, f.master_bytes);
  w.state_bytes = std::max(w.state_bytes, f.state_bytes);
  w.memory.add(f.memory);
}

void account_memory(WorldPrograms& w, const StepLayout& L) {
  account_memory(w, memory_facts(L));
}

// The issue ops of the reference rank's schedule in order, split by communicator, as batch
// specs: every other rank's issue on a shared communicator must be the same collective.
struct ReferenceBatches {
  std::vector<const BatchSpec*> by_comm[engine::kCommGroupCount];

  const BatchSpec* take(const engine::StepOp& op, int seq) const {
    const auto& list = by_comm[static_cast<std::size_t>(op.comm)];
    if (seq >= static_cast<int>(list.size()) || list[static_cast<std::size_t>(seq)]->op != op.op ||
        list[static_cast<std::size_t>(seq)]->group != op.group)
      throw RuntimeFailure(fmt::format(
          "projection: rank symmetry broken: issue {} of group {} is not the reference rank's "
          "collective {} on its communicator",
          engine::op_name(op.op), op.group, seq));
    return list[static_cast<std::size_t>(seq)];
  }
};

ReferenceBatches reference_batches(WorldPrograms& w, const StepLayout& L, const engine::Schedule& s,
                                   const engine::StepSpec& spec) {
  ReferenceBatches r;
  std::vector<const engine::StepOp*> issues;
  for (const auto& op : s) {
    // The TP exchange is each rank's own (its owned parameters): not shared.
    if (engine::is_issue(op.op) && op.comm != engine::CommGroup::tp) issues.push_back(&op);
  }
  // The specs are made first and their calls after, so that the specs lie back to back: every
  // rank's program store pass reads each issue's spec in this order (a cache miss each when
  // their calls lay in between).
  const std::size_t first = w.specs.size();
  w.specs.resize(first + issues.size());
  for (std::size_t i = 0; i < issues.size(); ++i) {
    BatchSpec& b = w.specs[first + i];
    b = batch_spec(L, *issues[i], spec);
    r.by_comm[static_cast<std::size_t>(b.comm)].push_back(&b);
  }
  return r;
}

// fsdp-muon: per shard column, the parameters (index in `ref`, length) whose shard there is
// shorter than a chunk. Ranks differ in durations only by these (apply of a last shard). An
// expert group's shard (--ep E < G) is its member's: column div E.
std::vector<std::vector<std::pair<int, std::int64_t>>> short_shards_by_column(
    const StepLayout& ref, int columns, engine::Method method) {
  std::vector<std::vector<std::pair<int, std::int64_t>>> out(static_cast<std::size_t>(columns));
  if (method != engine::Method::fsdp_muon) return out;
  const int ep = ref.me.grid.ep;
  for (std::size_t i = 0; i < ref.params.size(); ++i) {
    const auto& p = ref.params[i];
    if (!p.sharded() || !p.muon || p.chunk <= 0) continue;
    const bool expert = ref.in_expert_group(p);
    const std::int64_t last_full = std::max<std::int64_t>(0, (p.numel - p.chunk) / p.chunk);
    for (std::int64_t c = expert ? last_full * ep : last_full; c < columns; ++c) {
      const std::int64_t len = p.shard_len_at(static_cast<int>(expert ? c / ep : c));
      if (len < p.chunk) out[static_cast<std::size_t>(c)].emplace_back(static_cast<int>(i), len);
    }
  }
  return out;
}

// Objects whose storage is handed from one user to the next, across threads.
template <class T>
class Spares {
 public:
  T take() {
    std::lock_guard<std::mutex> lock(m_);
    if (free_.empty()) return {};
    T v = std::move(free_.back());
    free_.pop_back();
    return v;
  }
  void give(T v) {
    std::lock_guard<std::mutex> lock(m_);
    free_.push_back(std::move(v));
  }

 private:
  std::mutex m_;
  std::vector<T> free_;
};

// Fills one WorldPrograms: one member function per form (full, and the reduced forms of
// ddp-dmuon, the one-schedule methods and DMuon), sharing how a rank's program is compiled
// and recorded.
class ProgramBuilder {
 public:
  ProgramBuilder(const model::ModuleTree& tree, const plan::Plan& plan,
                 const engine::StepSpec& spec, const OpCost& cost, const SampleClasses& samples,
                 WorldPrograms& w)
      : tree_(tree),
        plan_(plan),
        spec_(spec),
        samples_(samples),
        durations_(cost, samples),
        gpu_(cost.cost().machine().device == DeviceKind::gpu),
        sms_(cost.cost().machine().compute.sm_count),
        held_sms_(cost.held_sms()),
        w_(w) {
    if (cost.held() != nullptr) held_durations_.emplace(*cost.held(), samples);
  }

  // make_layout + make_schedule for every rank; every batch is its own (and checked).
  void full() {
    w_.check_batches = true;
    for (int r = 0; r < w_.world; ++r) {
      const StepLayout L = engine::make_layout(tree_, plan_, spec_, r);
      const int id = add_program(engine::make_schedule(L, spec_), L, samples_.class_of(L.me.dp()),
                                 [&](const engine::StepOp& op, int) { return own_batch(L, op); });
      assign(r, id, L);
      track_hooks(id);
      w_.groups = static_cast<std::int64_t>(L.groups.size());
    }
  }

  // Rank symmetry: the collectives of one reference rank's schedule, shared.
  void reduced() {
    const int T = plan_.tp.tp;
    if (T > 1 && !engine::traits(spec_.method).tensor_parallel)
      throw std::logic_error("build_programs: --tp runs dmuon and fsdp-adamw (validate_tp_run)");
    const StepLayout ref = engine::make_layout(tree_, plan_, spec_, 0);
    const engine::Schedule ref_schedule = engine::make_schedule(ref, spec_);
    const ReferenceBatches batches = reference_batches(w_, ref, ref_schedule, spec_);
    w_.groups = static_cast<std::int64_t>(ref.groups.size());
    if (spec_.method == engine::Method::ddp_dmuon) return ddp_dmuon(batches);
    if (spec_.method != engine::Method::dmuon) return one_schedule(ref, ref_schedule, batches);
    dmuon(ref, batches);
  }

 private:
  int add_program(const engine::Schedule& s, const StepLayout& L, int cls, const BatchFn& batch) {
    return w_.programs.add(compile_program(
        s, [&](const engine::StepOp& op) { return seconds(L, cls, op); }, batch, {}, gpu_));
  }

  // Ops with GEMMs or attention; the others (packing, momentum, updates, clipping) are
  // elementwise kernels only, whose time no SMs held changes.
  static bool on_sms(engine::Op op) {
    switch (op) {
      case Op::forward:
      case Op::backward:
      case Op::newton_schulz:
      case Op::act_forward:
      case Op::act_recompute:
      case Op::act_backward: return true;
      default: return false;
    }
  }

  // An op's seconds, and the part of them on the SMs (compute_contention.hpp): from its cost
  // with the reference SMs held, where the machine models that.
  OpSeconds seconds(const StepLayout& L, int cls, const engine::StepOp& op,
                    const std::vector<int>* reference = nullptr) const {
    const double alone = durations_(L, cls, op, reference);
    if (!held_durations_ || alone <= 0 || !on_sms(op.op)) return alone;
    return {alone, sm_seconds(alone, (*held_durations_)(L, cls, op, reference), sms_, held_sms_)};
  }

  void assign(int rank, int id, const StepLayout& L) {
    w_.program_of_rank[static_cast<std::size_t>(rank)] = id;
    account_memory(w_, L);
  }

  void track_hooks(int id) {
    w_.hook_calls = std::max(w_.hook_calls, w_.programs.hook_calls(id));
    w_.hook_comm_calls = std::max(w_.hook_comm_calls, w_.programs.hook_comm_calls(id));
  }

  // A batch only this rank issues (locked: dmuon()'s workers add them too).
  const BatchSpec* own_batch(const StepLayout& L, const engine::StepOp& op) {
    BatchSpec own = batch_spec(L, op, spec_);
    std::lock_guard<std::mutex> lock(specs_mutex_);
    w_.specs.push_back(std::move(own));
    return &w_.specs.back();
  }

  // ddp-dmuon: who runs Newton–Schulz differs by rank (the owners): a layout and schedule per
  // rank. Every rank issues the reference rank's collectives on the one group of all ranks.
  void ddp_dmuon(const ReferenceBatches& batches) {
    for (int r = 0; r < w_.world; ++r) {
      const StepLayout L = engine::make_layout(tree_, plan_, spec_, r);
      const int id =
          add_program(engine::make_schedule(L, spec_), L, samples_.class_of(r),
                      [&](const engine::StepOp& op, int seq) { return batches.take(op, seq); });
      assign(r, id, L);
    }
    w_.hook_calls = w_.programs.hook_calls(0);
    w_.hook_comm_calls = w_.programs.hook_comm_calls(0);
  }

  // FSDP and DDP: one schedule for all; a program per (sample class, short last shards).
  void one_schedule(const StepLayout& ref, const engine::Schedule& ref_schedule,
                    const ReferenceBatches& batches) {
    const auto short_of_column = short_shards_by_column(ref, w_.grid.shard, spec_.method);
    std::map<std::pair<int, std::vector<std::pair<int, std::int64_t>>>, int> program_of_key;
    for (int r = 0; r < w_.world; ++r) {
      const int column = w_.grid.column(r);
      // Sample classes are per DP rank (--tp: the TP group's ranks share its samples).
      auto key = std::make_pair(samples_.class_of(w_.grid.dp(r)),
                                short_of_column[static_cast<std::size_t>(column)]);
      auto it = program_of_key.find(key);
      if (it == program_of_key.end()) {
        StepLayout L = ref;  // durations read me.column() (apply of a last shard)
        L.me.rank = r;
        const int id =
            add_program(ref_schedule, L, key.first,
                        [&](const engine::StepOp& op, int seq) { return batches.take(op, seq); });
        it = program_of_key.emplace(std::move(key), id).first;
      }
      w_.program_of_rank[static_cast<std::size_t>(r)] = it->second;
    }
    account_memory(w_, ref);
    w_.hook_calls = w_.programs.hook_calls(0);
    w_.hook_comm_calls = w_.programs.hook_comm_calls(0);
  }

  // DMuon: a reduced layout and schedule per rank (per DP rank, then per TP index: only the
  // TP owners' Newton–Schulz differ between the ranks of a TP group). The DP ranks' programs
  // are compiled on worker threads (independent: the reference's batches and the filled
  // duration totals are read-only, new batch specs are added under a lock) and stored in rank
  // order, so the store is the serial loop's.
  struct DpPrograms {
    std::vector<RankProgram> programs;  // per TP index
    std::vector<RankMemoryFacts> memory;
    int cls = 0;  // its sample class
  };

  void dmuon(const StepLayout& ref, const ReferenceBatches& batches) {
    const int T = plan_.tp.tp;
    for (Durations* d : {&durations_, held_durations_ ? &*held_durations_ : nullptr}) {
      if (d == nullptr) continue;
      d->set_reference(&ref);
      d->fill_totals(samples_.classes(), spec_.accum);
    }
    const LayoutReducer reducer(ref, plan_);
    std::map<int, std::vector<const BatchSpec*>> column_batches;
    for (int c = 0; c < w_.grid.shard; ++c) column_batches[c];  // no insertion while threaded
    // Program storage handed back to the workers: a program is ~3 MB for a model with 15,000
    // hook sites, and fresh pages are zeroed by the kernel each time. The schedule (~7 MB) is
    // never kept: it is compiled block by block as it is made, while the blocks are in cache.
    Spares<std::vector<Instruction>> codes;
    Spares<ReducedLayout> layouts;  // and reduced layouts: 15,000 groups' member lists each
    auto produce = [&](int dp) {
      DpPrograms out;
      ReducedLayout R = reducer.reduce(dp * T, layouts.take());
      const int cls = out.cls = samples_.class_of(dp);
      for (int t = 0; t < T; ++t) {
        R.layout.me.rank = dp * T + t;  // the TP owners' Newton–Schulz differs by t
        const StepLayout& L = R.layout;
        auto& mine = column_batches.at(L.me.column());
        const DurationFn duration = [&](const engine::StepOp& op) {
          return seconds(L, cls, op, &R.reference);
        };
        const BatchFn batch = [&](const engine::StepOp& op, int seq) {
          return dmuon_batch(L, mine, batches, op, seq);
        };
        ProgramCompiler compiler(duration, batch, codes.take(), gpu_);
        engine::stream_schedule(L, spec_, [&](const engine::StepOp* ops, std::size_t count) {
          compiler.add(ops, count);
        });
        out.programs.push_back(compiler.finish());
        out.memory.push_back(memory_facts(L));
      }
      layouts.give(std::move(R));
      return out;
    };
    std::map<int, int> last_of_class;  // the program last stored for a sample class
    auto store = [&](int dp, DpPrograms&& in) {
      for (int t = 0; t < T; ++t) {
        auto& program = in.programs[static_cast<std::size_t>(t)];
        const auto like = last_of_class.find(in.cls);
        const int id = w_.programs.add(program, like == last_of_class.end() ? -1 : like->second);
        last_of_class[in.cls] = id;
        codes.give(std::move(program.code));
        w_.program_of_rank[static_cast<std::size_t>(dp * T + t)] = id;
        account_memory(w_, in.memory[static_cast<std::size_t>(t)]);
        track_hooks(id);
      }
    };
    // Past a few workers the store (one thread) is the bottleneck, and every program in flight
    // holds ~10 MB at 15,000 sites: at most 8 workers, 2 programs each ahead of the store.
    const int workers = std::min(hardware_threads(), 8);
    ordered_parallel<DpPrograms>(w_.grid.dp_size(), workers, 2 * workers, produce, store);
  }

  // A DMuon rank's batch: TP exchanges are its own, shard-group collectives the reference
  // rank's, and column (replicate) collectives the first of its column's ranks to issue them
  // (the others must agree with it). Called from worker threads: what it adds is locked.
  const BatchSpec* dmuon_batch(const StepLayout& L, std::vector<const BatchSpec*>& column,
                               const ReferenceBatches& batches, const engine::StepOp& op, int seq) {
    if (op.comm == engine::CommGroup::tp) return own_batch(L, op);  // owned: kept whole
    if (op.comm != engine::CommGroup::replicate) return batches.take(op, seq);
    BatchSpec batch = batch_spec(L, op, spec_);
    std::lock_guard<std::mutex> lock(specs_mutex_);
    if (seq < static_cast<int>(column.size())) {
      const BatchSpec* known = column[static_cast<std::size_t>(seq)];
      if (known->op != batch.op || known->group != batch.group || !(known->calls == batch.calls))
        throw RuntimeFailure(fmt::format(
            "projection: ranks of column {} disagree on their collective {}", L.me.column(), seq));
      return known;
    }
    w_.specs.push_back(std::move(batch));
    column.push_back(&w_.specs.back());
    return &w_.specs.back();
  }

  const model::ModuleTree& tree_;
  const plan::Plan& plan_;
  const engine::StepSpec& spec_;
  const SampleClasses& samples_;
  Durations durations_;
  std::optional<Durations> held_durations_;  // with the reference SMs held, where modelled
  bool gpu_ = false;                         // stage-2 issues hoisted (compile_program)
  int sms_ = 0, held_sms_ = 0;
  WorldPrograms& w_;
  std::mutex specs_mutex_;  // w_.specs and the column batches, from dmuon()'s workers
};

}  // namespace

WorldPrograms build_programs(const model::ModuleTree& logical_tree, const plan::Plan& plan,
                             const engine::EngineOptions& o, const OpCost& cost,
                             Symmetry symmetry) {
  // --tp T: every DP group (the ranks of one TP index t) runs the step on the local shard
  // shapes; world rank = dp · T + t (base/rank_grid.hpp).
  std::optional<model::ModuleTree> local_tree;
  if (plan.tp.tp > 1) local_tree.emplace(plan::tp_local_tree(logical_tree, plan));
  const model::ModuleTree& tree = local_tree ? *local_tree : logical_tree;
  WorldPrograms w;
  w.grid = engine::method_grid(plan, o.step.method);
  const int dp_world = w.grid.dp_size();
  w.world = w.grid.world();
  w.run_model = engine::step_run_model(o.step);
  w.program_of_rank.assign(static_cast<std::size_t>(w.world), 0);
  const SampleClasses samples(tree, o.step.global_samples(dp_world), dp_world, o.step.accum, &plan);
  ProgramBuilder builder(tree, plan, o.step, cost, samples, w);
  if (symmetry == Symmetry::full)
    builder.full();
  else
    builder.reduced();
  return w;
}

}  // namespace dmuon::project
