#include "options/run_option_rules.hpp"
#include "options/run_option_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/config_dir.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/model/training_seq_len.hpp"
#include "dmuon/plan/tp_layouts.hpp"
#include "dmuon/project/machine_model.hpp"

namespace dmuon::apps::options {
namespace {

// Drops repeated items, keeping the first of each.
template <class T>
void keep_first(std::vector<T>& items) {
  std::vector<T> out;
  for (const auto& x : items)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  items = std::move(out);
}

std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

void refuse_both(const RunOptions& o, const std::string& a, const std::string& b,
                 const std::string& why) {
  if (o.was_given(a) && o.was_given(b))
    throw InputError(fmt::format("{} and {} {}: give one", dashed(a), dashed(b), why));
}

void needs(const RunOptions& o, const std::string& option, const std::string& needed,
           const std::string& why) {
  if (o.was_given(option) && !o.was_given(needed))
    throw InputError(fmt::format("{} needs {} ({})", dashed(option), dashed(needed), why));
}

// --seq-len / --micro-batch (tokens per rank and micro-step), --ac.
void workload_rules(RunOptions& o) {
  const auto& w = o.workload;
  if (o.was_given("seq_len") != o.was_given("micro_batch"))
    throw InputError("--seq-len and --micro-batch go together (tokens per rank = their product)");
  if (w.seq_len > 0) {
    refuse_both(o, "seq_len", "global_tokens", "both set the batch");
    refuse_both(o, "seq_len", "tokens", "both set the batch");
    o.engine.step.tokens = step_tokens(o);
  }
  if (w.ac != work::AcPolicy::none && w.seq_len == 0)
    throw InputError(fmt::format("--ac {} needs --seq-len (the activation work it recomputes)",
                                 work::ac_policy_name(w.ac)));
}

// What the rows declare of each other (option.hpp: excluding, needing).
void row_rules(const RunOptions& o) {
  for (const auto& row : run_option_table()) {
    const std::string key = row.key_name();
    for (const auto& [other, why] : row.excludes) refuse_both(o, key, other, why);
    for (const auto& [needed, why] : row.requires_given) needs(o, key, needed, why);
  }
}

// --sequence-parallel: the projection's (the engine's TP Linears have no activation
// collectives), with a TP group and the activation work it splits.
void sequence_parallel_rules(const RunOptions& o, Tool tool) {
  if (!o.workload.sequence_parallel) return;
  if (tool == kBench || tool == kInspect)
    throw InputError(
        "--sequence-parallel is projected, not run (valid: dmuon_project, dmuon_advise): the "
        "engine's TP shards are Linears without activation collectives");
  if (o.plan.tp == 1)
    throw InputError(
        "--sequence-parallel needs --tp T > 1 (it splits the tokens of a TP group; valid: "
        "--tp 2.. with --seq-len)");
  if (o.workload.seq_len <= 0)
    throw InputError(
        "--sequence-parallel needs --seq-len (the activation work it splits over the TP group)");
}

// --ep-dispatcher, --routing: they shape the EP all-to-alls of the activation work, so they
// need it and (dmuon_project) an EP group; --routing changes only DeepEP's bytes.
void expert_dispatch_rules(const RunOptions& o, Tool tool) {
  const auto& w = o.workload;
  if (w.ep_dispatcher == work::EpDispatcher::deepep) {
    if (w.seq_len <= 0)
      throw InputError(
          "--ep-dispatcher deepep needs --seq-len (the activation work whose tokens it moves)");
    if ((tool == kProject || tool == kBench) && o.plan.ep == 1)
      throw InputError(
          "--ep-dispatcher deepep needs --ep E > 1 (with --ep 1 no token leaves its rank; "
          "valid: --ep 2.. dividing the experts)");
  }
  // The default (uniform) is what a recorded config writes: only another routing is refused.
  if (w.routing != work::ExpertRouting::uniform && w.ep_dispatcher != work::EpDispatcher::deepep)
    throw InputError(fmt::format(
        "--routing {} changes only --ep-dispatcher deepep's bytes (torchtitan's all-to-all "
        "sends every routed copy whatever the routing; valid: add --ep-dispatcher deepep)",
        work::expert_routing_name(w.routing)));
}

// dmuon_bench --pp: what the engine's stages run (the rest is dmuon_project's).
void pipeline_run_rules(const RunOptions& o) {
  const auto& w = o.workload;
  if (w.pp_chunks > 1)
    throw InputError(fmt::format(
        "--pp-chunks {}: interleaved 1F1B is projected, not run (valid: dmuon_project; here "
        "--pp-chunks 1)",
        w.pp_chunks));
  if (o.plan.tp > 1)
    throw InputError(fmt::format(
        "--pp {} with --tp {}: not run together by the engine yet (valid: dmuon_project; here "
        "--pp with data and expert parallelism: --replicate, --ep)",
        w.pp, o.plan.tp));
}

// --pp, --pp-chunks, --pp-microbatches: dmuon_project's, on the step work, with TP and EP
// inside each stage but not CP yet (each stage is projected as an ordinary world:
// pipeline_run.hpp); dmuon_bench runs 1F1B stages of data and expert parallelism on the host
// engine (engine/step/pipeline_order.hpp).
void pipeline_rules(const RunOptions& o, Tool tool) {
  const auto& w = o.workload;
  if (w.pp == 1 && w.pp_chunks == 1 && w.pp_microbatches == 0) return;
  if (tool != kProject && tool != kBench)
    throw InputError(fmt::format(
        "--pp {}: pipeline parallelism is projected (dmuon_project) or run (dmuon_bench), not "
        "searched or inspected (here --pp 1)",
        w.pp));
  if (w.pp == 1 && w.pp_chunks > 1)
    throw InputError(fmt::format(
        "--pp-chunks {} needs --pp P > 1 (it splits each pipeline rank's blocks; valid: --pp 2..)",
        w.pp_chunks));
  if (w.pp == 1)
    throw InputError(fmt::format(
        "--pp-microbatches {} needs --pp P > 1 (it sizes a run of the pipeline schedule; valid: "
        "--pp 2..)",
        w.pp_microbatches));
  if (w.pp_microbatches > 0 && o.engine.step.accum % w.pp_microbatches != 0)
    throw InputError(fmt::format(
        "--pp-microbatches {} does not divide --accum {} (valid: a divisor of --accum: the step's "
        "micro-batches in runs of equal size)",
        w.pp_microbatches, o.engine.step.accum));
  if (w.seq_len <= 0)
    throw InputError(fmt::format(
        "--pp {} needs --seq-len (the stages' activation work sets the pipeline's bubble{})", w.pp,
        tool == kBench ? " and the size of the stage boundary's messages" : ""));
  if (w.cp > 1)
    throw InputError(fmt::format(
        "--pp {} with --cp: not modelled together yet (valid: --pp with data, tensor and expert "
        "parallelism: --replicate, --tp, --ep)",
        w.pp));
  if (!o.output.empty() || !o.trace.empty())
    throw InputError(fmt::format(
        "--pp {}: a pipeline {} prints its tables or --json; it writes no results file or trace "
        "yet (valid: without --output and --trace)",
        w.pp, tool == kBench ? "run" : "projection"));
  if (tool == kBench) pipeline_run_rules(o);
}

// --cp: the projection's (the engine has no attention ring, the advisor does not search it).
void context_parallel_tool(const RunOptions& o, Tool tool) {
  if (o.workload.cp != 1 && tool != kProject && tool != kAdvise)
    throw InputError(fmt::format(
        "--cp {} is projected and searched, not run (valid: dmuon_project, dmuon_advise; here "
        "only 1)",
        o.workload.cp));
}

// --cp: on the activation work it splits (after the projection's preset sequence length).
void context_parallel_rules(const RunOptions& o) {
  const int cp = o.workload.cp;
  if (cp == 1) return;
  if (o.workload.seq_len <= 0)
    throw InputError(fmt::format(
        "--cp {} needs --seq-len (the activation work it splits over the CP group)", cp));
  if (o.workload.seq_len % (2 * cp) != 0) {
    // dmuon_project may have taken the length from the preset (preset_seq_len): say whose.
    const std::string length =
        o.workload.seq_len_note.empty()
            ? fmt::format("--seq-len {}", o.workload.seq_len)
            : fmt::format("the preset's sequence length {} (--seq-len not given)",
                          o.workload.seq_len);
    throw InputError(
        fmt::format("{} does not split into the 2 x {} chunks of --cp {} (valid: a "
                    "multiple of {})",
                    length, cp, cp, 2 * cp));
  }
}

void step_rules(RunOptions& o) {
  row_rules(o);
  o.plan.reshard = o.engine.step.reshard;  // Z2 sites differ for tied parameters (SPEC §3)
  o.engine.run.trace = !o.trace.empty();
  if (o.engine.run.inject_nan_step > o.engine.run.total_steps())
    throw InputError(fmt::format("--inject-nan-step {} is invalid (valid: 1..{} = warmup + steps)",
                                 o.engine.run.inject_nan_step, o.engine.run.total_steps()));
}

void single(const std::vector<std::string>& items, const char* flag, const char* tool_does) {
  if (items.size() > 1)
    throw InputError(fmt::format("{} is given {} times; {}", flag, items.size(), tool_does));
}

void inspect_rules(RunOptions& o) {
  if (!o.layout.empty()) {
    for (const char* k : {"world_size", "replicate", "tp"})
      if (o.was_given(k))
        throw InputError(
            fmt::format("--layout {} sets {} itself: give one of the two", o.layout, dashed(k)));
    const auto& l = plan::find_tp_layout(o.layout);
    o.projection.world_sizes = {l.world};
    o.plan.partition.replicate = l.replicate;
    o.plan.tp = l.tp;
  }
  if (o.projection.world_sizes.empty()) o.projection.world_sizes = {8};
  if (o.projection.world_sizes.size() != 1)
    throw InputError("--world-size names several worlds; dmuon_inspect shows one");
  single(o.boundaries, "--boundary", "dmuon_inspect shows one boundary");
  if (o.owner_strategies.size() != 1)
    throw InputError("--owner-strategy names several strategies; dmuon_inspect shows one");
}

void project_rules(RunOptions& o) {
  auto& p = o.projection;
  needs(o, "trace_ranks", "trace", "where to write the timeline");
  if (p.calibrate) {
    if (p.output_machine.empty())
      throw InputError("--calibrate needs --output-machine FILE (the machine file to write)");
    return;
  }
  if (!p.output_machine.empty()) throw InputError("--output-machine needs --calibrate");
  if (p.world_sizes.empty())
    throw InputError("--world-size is required (ranks of the modelled world, e.g. 8,64,512)");
  if (p.machine.empty()) {
    const auto names =
        project::machine_names(config_dir().empty() ? std::string() : config_dir() + "/machines");
    throw InputError(fmt::format(
        "--machine is required ({}, or a YAML machine file)",
        names.empty() ? "no shipped machine found" : fmt::format("{}", fmt::join(names, ", "))));
  }
  keep_first(p.world_sizes);
}

// dmuon_project on an LLM preset without --seq-len (nor --tokens, --global-tokens): the
// preset's training sequence length, micro-batch 1, and a note saying so; not a parameter-only
// step of one token per sample.
void preset_seq_len(RunOptions& o) {
  if (o.projection.calibrate || !o.model.topology_file.empty()) return;
  for (const char* k : {"seq_len", "micro_batch", "tokens", "global_tokens"})
    if (o.was_given(k)) return;
  const auto known = model::training_seq_len(o.model.topology, o.model.preset);
  if (!known) return;
  auto& w = o.workload;
  w.seq_len = known->tokens;
  w.micro_batch = 1;
  o.engine.step.tokens = step_tokens(o);
  w.seq_len_note = fmt::format(
      "--seq-len not given: preset {}'s training sequence length, {} tokens ({}), micro-batch "
      "1; give --seq-len/--micro-batch for another, --tokens N for the parameter work alone",
      o.model.preset, known->tokens, known->source);
}

void advise_rules(RunOptions& o) {
  for (auto m : o.methods)
    if (m != engine::Method::dmuon)
      throw InputError(fmt::format(
          "--method {}: dmuon_advise searches layouts for dmuon (valid: dmuon; fsdp-adamw is "
          "projected beside every ranked row)",
          engine::method_name(m)));
  o.methods = {engine::Method::dmuon};
  project_rules(o);
  if (o.projection.world_sizes.size() != 1)
    throw InputError(fmt::format(
        "--world-size names {} worlds; the advisor answers for one (run it once per world)",
        o.projection.world_sizes.size()));
  single(o.boundaries, "--boundary",
         "the advisor starts from one boundary and searches the others");
  if (!o.boundaries.empty()) {
    const auto item = config::parse_boundary_item(o.boundaries.front());
    if (item.strict.has_value() && !*item.strict)
      throw InputError(fmt::format(
          "--boundary {}: the advisor searches strict boundaries only (a lenient one hides "
          "uncovered parameters)",
          o.boundaries.front()));
  }
  if (o.owner_strategies.size() != 1)
    throw InputError(
        "--owner-strategy names several strategies; the advisor starts from one and searches "
        "the others itself");
}

}  // namespace

std::int64_t step_tokens(const RunOptions& o) {
  // --cp C: each rank holds 1/C of every sequence (context_parallel_rules: C divides it).
  return o.workload.seq_len / o.workload.cp * o.workload.micro_batch * o.engine.step.accum;
}

void apply_rules(RunOptions& o, Tool tool) {
  workload_rules(o);
  step_rules(o);
  if (o.methods.empty() && tool != kAdvise)  // the advisor's rule: dmuon alone
    o.methods = o.plan.tp > 1
                    ? std::vector<engine::Method>{engine::Method::dmuon, engine::Method::fsdp_adamw}
                    : std::vector<engine::Method>{engine::Method::dmuon, engine::Method::fsdp_adamw,
                                                  engine::Method::fsdp_muon};
  // Each method and strategy once, in the order given.
  keep_first(o.methods);
  keep_first(o.owner_strategies);
  context_parallel_tool(o, tool);
  switch (tool) {
    case kInspect: inspect_rules(o); break;
    case kBench: break;
    case kProject:
      project_rules(o);
      preset_seq_len(o);
      break;
    case kAdvise: advise_rules(o); break;
  }
  sequence_parallel_rules(o, tool);
  expert_dispatch_rules(o, tool);
  pipeline_rules(o, tool);
  context_parallel_rules(o);
}

}  // namespace dmuon::apps::options
