#include "dmuon/project/world_programs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
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

  double operator()(const StepLayout& L, int cls, const engine::StepOp& op) const {
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
        const auto& p = L.params[static_cast<std::size_t>(op.param)];
        if (!is_aggregate(p)) return one(p, cls, op.micro, fwd);
        double kept = 0;
        for (int pi : L.groups[static_cast<std::size_t>(op.group)].members) {
          const auto& q = L.params[static_cast<std::size_t>(pi)];
          if (!is_aggregate(q)) kept += one(q, cls, op.micro, fwd);
        }
        return std::max(0.0, total(cls, op.micro, op.group, fwd) - kept);
      }
      case Op::newton_schulz:
        return cost_.newton_schulz(L.params[static_cast<std::size_t>(op.param)]);
      case Op::apply:
        return cost_.apply(L.params[static_cast<std::size_t>(op.param)], L.me.column());
      default: return 0;
    }
  }

 private:
  double one(const engine::ParamLayout& p, int cls, int micro, bool fwd) const {
    const std::int64_t local = samples_.local(p.pid, cls, micro);
    return fwd ? cost_.forward(p, local) : cost_.backward(p, local);
  }

  double total(int cls, int micro, int group, bool fwd) const {
    const auto key = std::make_pair(cls, micro);
    auto it = totals_.find(key);
    if (it == totals_.end()) {
      std::vector<std::array<double, 2>> t(ref_->groups.size(), {0.0, 0.0});
      for (std::size_t g = 0; g < ref_->groups.size(); ++g)
        for (int pi : ref_->groups[g].members) {
          const auto& p = ref_->params[static_cast<std::size_t>(pi)];
          t[g][0] += one(p, cls, micro, true);
          t[g][1] += one(p, cls, micro, false);
        }
      it = totals_.emplace(key, std::move(t)).first;
    }
    return it->second[static_cast<std::size_t>(group)][fwd ? 0 : 1];
  }

  const OpCost& cost_;
  const SampleClasses& samples_;
  const StepLayout* ref_ = nullptr;
  mutable std::map<std::pair<int, int>, std::vector<std::array<double, 2>>>
      totals_;  // (cls, micro)
};

void account_memory(WorldPrograms& w, const StepLayout& L) {
  w.peak_packed_bytes = std::max(w.peak_packed_bytes, L.live_weight_bytes);
  w.master_bytes = std::max(w.master_bytes, L.master_elems * 4);
  w.state_bytes = std::max(w.state_bytes, (L.state_elems + L.second_state_elems) * 4);
  w.memory.add(memory_of(L));
}

// The issue ops of a schedule in order, split by communicator, as batch specs.
struct ReferenceBatches {
  std::vector<const BatchSpec*> by_comm[engine::kCommGroupCount];
};

ReferenceBatches reference_batches(WorldPrograms& w, const StepLayout& L, const engine::Schedule& s,
                                   const engine::StepSpec& spec) {
  ReferenceBatches r;
  for (const auto& op : s) {
    // The TP exchange is each rank's own (its owned parameters): not shared.
    if (!engine::is_issue(op.op) || op.comm == engine::CommGroup::tp) continue;
    w.specs.push_back(batch_spec(L, op, spec));
    r.by_comm[static_cast<std::size_t>(w.specs.back().comm)].push_back(&w.specs.back());
  }
  return r;
}

const BatchSpec* take(const std::vector<const BatchSpec*>& list, const engine::StepOp& op,
                      int seq) {
  if (seq >= static_cast<int>(list.size()) || list[static_cast<std::size_t>(seq)]->op != op.op ||
      list[static_cast<std::size_t>(seq)]->group != op.group)
    throw RuntimeFailure(fmt::format(
        "projection: rank symmetry broken: issue {} of group {} is not the reference rank's "
        "collective {} on its communicator",
        engine::op_name(op.op), op.group, seq));
  return list[static_cast<std::size_t>(seq)];
}

}  // namespace

WorldPrograms build_programs(const model::ModuleTree& logical_tree, const plan::Plan& plan,
                             const engine::EngineOptions& o, const OpCost& cost,
                             Symmetry symmetry) {
  // --tp T: every DP group (the ranks of one TP index t) runs the step on the local shard
  // shapes; world rank = dp · T + t (base/rank_grid.hpp).
  const int T = plan.tp.tp;
  std::optional<model::ModuleTree> local_tree;
  if (T > 1) local_tree.emplace(plan::tp_local_tree(logical_tree, plan));
  const model::ModuleTree& tree = local_tree ? *local_tree : logical_tree;
  WorldPrograms w;
  w.grid = engine::method_grid(plan, o.step.method);
  const int dp_world = w.grid.dp_size();
  const int world = w.grid.world();
  w.world = world;
  w.program_of_rank.assign(static_cast<std::size_t>(world), 0);
  const engine::StepSpec& spec = o.step;
  const SampleClasses samples(tree, o.step.global_samples(dp_world), dp_world, o.step.accum);
  Durations durations(cost, samples);

  if (symmetry == Symmetry::full) {
    w.check_batches = true;
    for (int r = 0; r < world; ++r) {
      const StepLayout L = engine::make_layout(tree, plan, spec, r);
      const engine::Schedule s = engine::make_schedule(L, spec);
      const int cls = samples.class_of(L.me.dp());
      const int id = w.programs.add(compile_program(
          s, [&](const engine::StepOp& op) { return durations(L, cls, op); },
          [&](const engine::StepOp& op, int) {
            w.specs.push_back(batch_spec(L, op, spec));
            return &w.specs.back();
          }));
      w.program_of_rank[static_cast<std::size_t>(r)] = id;
      account_memory(w, L);
      w.hook_calls = std::max(w.hook_calls, w.programs.hook_calls(id));
      w.hook_comm_calls = std::max(w.hook_comm_calls, w.programs.hook_comm_calls(id));
      w.groups = static_cast<std::int64_t>(L.groups.size());
    }
    return w;
  }

  if (T > 1 && !engine::traits(o.step.method).tensor_parallel)
    throw std::logic_error("build_programs: --tp runs dmuon only (validate_tp_run)");
  const StepLayout ref = engine::make_layout(tree, plan, spec, 0);
  const engine::Schedule ref_schedule = engine::make_schedule(ref, spec);
  const ReferenceBatches batches = reference_batches(w, ref, ref_schedule, spec);
  w.groups = static_cast<std::int64_t>(ref.groups.size());

  if (o.step.method == engine::Method::ddp_dmuon) {
    // Who runs Newton–Schulz differs by rank (the owners): a layout and schedule per rank. Every
    // rank issues the reference rank's collectives on the one group of all ranks.
    for (int r = 0; r < world; ++r) {
      const StepLayout L = engine::make_layout(tree, plan, spec, r);
      const engine::Schedule s = engine::make_schedule(L, spec);
      const int cls = samples.class_of(r);
      const int id = w.programs.add(compile_program(
          s, [&](const engine::StepOp& op) { return durations(L, cls, op); },
          [&](const engine::StepOp& op, int seq) {
            return take(batches.by_comm[static_cast<std::size_t>(op.comm)], op, seq);
          }));
      w.program_of_rank[static_cast<std::size_t>(r)] = id;
      account_memory(w, L);
    }
    w.hook_calls = w.programs.hook_calls(0);
    w.hook_comm_calls = w.programs.hook_comm_calls(0);
    return w;
  }

  if (o.step.method != engine::Method::dmuon) {
    // One schedule for all; a program per (sample class, short last shards).
    const int columns = w.grid.shard;
    std::vector<std::vector<std::pair<int, std::int64_t>>> short_of_column(
        static_cast<std::size_t>(columns));
    if (o.step.method == engine::Method::fsdp_muon)
      for (std::size_t i = 0; i < ref.params.size(); ++i) {
        const auto& p = ref.params[i];
        if (!p.sharded() || !p.muon || p.chunk <= 0) continue;
        for (std::int64_t c = std::max<std::int64_t>(0, (p.numel - p.chunk) / p.chunk); c < columns;
             ++c) {
          const std::int64_t len = p.shard_len_at(static_cast<int>(c));
          if (len < p.chunk)
            short_of_column[static_cast<std::size_t>(c)].emplace_back(static_cast<int>(i), len);
        }
      }
    std::map<std::pair<int, std::vector<std::pair<int, std::int64_t>>>, int> program_of_key;
    for (int r = 0; r < world; ++r) {
      const int column = w.grid.column(r);
      auto key =
          std::make_pair(samples.class_of(r), short_of_column[static_cast<std::size_t>(column)]);
      auto it = program_of_key.find(key);
      if (it == program_of_key.end()) {
        StepLayout L = ref;  // durations read me.column() (apply of a last shard)
        L.me.rank = r;
        const int cls = key.first;
        const int id = w.programs.add(compile_program(
            ref_schedule, [&](const engine::StepOp& op) { return durations(L, cls, op); },
            [&](const engine::StepOp& op, int seq) {
              return take(batches.by_comm[static_cast<std::size_t>(op.comm)], op, seq);
            }));
        it = program_of_key.emplace(std::move(key), id).first;
      }
      w.program_of_rank[static_cast<std::size_t>(r)] = it->second;
    }
    account_memory(w, ref);
    w.hook_calls = w.programs.hook_calls(0);
    w.hook_comm_calls = w.programs.hook_comm_calls(0);
    return w;
  }

  // DMuon: a reduced layout and schedule per rank (per DP rank, then per TP index: only the
  // TP owners' Newton–Schulz differ between the ranks of a TP group).
  durations.set_reference(&ref);
  const LayoutReducer reducer(ref, plan);
  std::map<int, std::vector<const BatchSpec*>> column_batches;
  for (int dp = 0; dp < dp_world; ++dp) {
    ReducedLayout R = reducer.reduce(dp * T);
    const int cls = samples.class_of(dp);
    for (int t = 0; t < T; ++t) {
      R.layout.me.rank = dp * T + t;  // the TP owners' Newton–Schulz differs by t
      const StepLayout& L = R.layout;
      const engine::Schedule s = engine::make_schedule(L, spec);
      auto& mine = column_batches[L.me.column()];
      const int id = w.programs.add(compile_program(
          s, [&](const engine::StepOp& op) { return durations(L, cls, op); },
          [&](const engine::StepOp& op, int seq) -> const BatchSpec* {
            const auto comm = op.comm;
            if (comm == engine::CommGroup::tp) {  // the owned parameters are kept whole
              w.specs.push_back(batch_spec(L, op, spec));
              return &w.specs.back();
            }
            if (comm != engine::CommGroup::replicate)
              return take(batches.by_comm[static_cast<std::size_t>(comm)], op, seq);
            BatchSpec batch = batch_spec(L, op, spec);
            if (seq < static_cast<int>(mine.size())) {
              const BatchSpec* known = mine[static_cast<std::size_t>(seq)];
              if (known->op != batch.op || known->group != batch.group ||
                  !(known->calls == batch.calls))
                throw RuntimeFailure(
                    fmt::format("projection: ranks of column {} disagree on their collective {}",
                                L.me.column(), seq));
              return known;
            }
            w.specs.push_back(std::move(batch));
            mine.push_back(&w.specs.back());
            return &w.specs.back();
          }));
      const int r = dp * T + t;
      w.program_of_rank[static_cast<std::size_t>(r)] = id;
      account_memory(w, L);
      w.hook_calls = std::max(w.hook_calls, w.programs.hook_calls(id));
      w.hook_comm_calls = std::max(w.hook_comm_calls, w.programs.hook_comm_calls(id));
    }
  }
  return w;
}

}  // namespace dmuon::project
