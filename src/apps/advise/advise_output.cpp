#include "advise/advise_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "dmuon/base/abbreviate.hpp"
#include "options/run_option_outputs.hpp"

namespace dmuon::apps::advise {
namespace {

int count_status(const SearchResult& r, Status s) {
  int n = 0;
  for (const auto& e : r.evaluated) n += e.outcome.status == s;
  return n;
}

int count_dominated(const SearchResult& r) {
  int n = 0;
  for (const auto& e : r.evaluated) n += e.dominated;
  return n;
}

// DMuon's step over fsdp-adamw's at the same knobs ("-" when the baseline was not projected or
// does not fit).
std::string versus_adamw(const Evaluated& e) {
  if (!e.baseline || e.baseline->status != Status::ok || e.outcome.status != Status::ok) return "-";
  return fmt::format("{:.3f}", e.outcome.step_ms / e.baseline->step_ms);
}

std::string step_text(const Outcome& o) {
  if (o.status == Status::ok) return fmt::format("{:.1f}", o.step_ms);
  if (o.status == Status::oom)
    return fmt::format("oom (+{:.1f} GB)", static_cast<double>(o.excess_bytes) / 1e9);
  return "rejected";
}

std::string row(const std::string& rank, const Evaluated& e, const Candidate& start, int world) {
  const auto& o = e.outcome;
  const bool ok = o.status == Status::ok;
  return fmt::format(
      "  {:<6} {:>16} {:>7} {:>10} {:>8.1f} {:>6} {:<24} {:>7} {:>6}  {}\n", rank, step_text(o),
      ok ? fmt::format("{:.1f}", 100 * o.mfu) : "-",
      ok ? fmt::format("{:.5g}", o.tokens_per_s / world) : "-",
      static_cast<double>(o.peak_bytes) / 1e9, versus_adamw(e),
      o.dominant_phase.empty() ? std::string("-")
                               : fmt::format("{} {:.1f} ms", o.dominant_phase, o.dominant_ms),
      o.sites, o.idle_ranks, abbreviate_value(describe_changes(e.candidate, start), 90));
}

nlohmann::json outcome_json(const Outcome& o) {
  nlohmann::json j = {{"status", status_name(o.status)},
                      {"sites", o.sites},
                      {"idle_ranks", o.idle_ranks},
                      {"projection_wall_s", o.wall_s}};
  if (o.status == Status::rejected) {
    j["error"] = o.error;
    return j;
  }
  j["peak_bytes"] = o.peak_bytes;
  j["peak_GB"] = static_cast<double>(o.peak_bytes) / 1e9;
  j["peak_rank"] = o.peak_rank;
  j["peak_phase"] = o.peak_phase;
  j["excess_bytes"] = o.excess_bytes;
  j["activation_bytes"] = o.activation_bytes;
  if (o.status == Status::oom) {
    j["error"] = o.error;
    return j;
  }
  j["step_ms"] = o.step_ms;
  j["mfu"] = o.mfu;
  j["tokens_per_s"] = o.tokens_per_s;
  j["dominant_phase"] = o.dominant_phase;
  j["dominant_ms"] = o.dominant_ms;
  return j;
}

nlohmann::json candidate_json(const Candidate& c) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < c.values.size(); ++k) j[knobs()[k]->key_name()] = c.value(k);
  return j;
}

nlohmann::json evaluated_json(const Evaluated& e, const SearchResult& r) {
  nlohmann::json j = {
      {"knobs", candidate_json(e.candidate)},
      {"changes", describe_changes(e.candidate, r.start)},
      {"boundary_origin", r.space.boundary_origin.count(e.candidate.value("boundary"))
                              ? r.space.boundary_origin.at(e.candidate.value("boundary"))
                              : std::string()},
      {"outcome", outcome_json(e.outcome)},
      {"dominated", e.dominated}};
  // The run shape: the micro-batch knob and the accum it pairs with (0: no --seq-len).
  j["micro_batch"] = std::stoll(e.candidate.value("micro_batch"));
  j["cp"] = std::stoi(e.candidate.value("cp"));
  j["accum"] = e.candidate.accum;
  if (e.baseline) {
    j["fsdp_adamw"] = outcome_json(*e.baseline);
    if (e.baseline->status == Status::ok && e.outcome.status == Status::ok)
      j["dmuon_vs_adamw"] = e.outcome.step_ms / e.baseline->step_ms;
  }
  return j;
}

// "1.41x faster"; "0.4 % faster" under 10 %, with the projection's resolution under 2 %.
std::string speedup_text(double ratio) {
  if (ratio >= 1.1) return fmt::format("{:.2f}x faster", ratio);
  std::string s = fmt::format("{:.1f} % faster", 100 * (ratio - 1));
  if (ratio < 1.02) s += "; under 2 %: below what the projection resolves, the start is as good";
  return s;
}

// The micro-batch knob's values, each with its accum (none without --seq-len).
nlohmann::json micro_batch_json(const SearchResult& r) {
  nlohmann::json out = nlohmann::json::array();
  const std::size_t k = knob("micro_batch");
  for (const auto& v : r.space.of(k)) {
    if (v == "0") continue;  // no --seq-len
    const auto c = r.start.with(k, v);
    out.push_back({{"micro_batch", std::stoll(v)}, {"accum", c.accum}});
  }
  return out;
}

// The CP knob's values, each with its accum (the start's alone where no CP is searched).
nlohmann::json cp_json(const SearchResult& r) {
  nlohmann::json out = nlohmann::json::array();
  const std::size_t k = knob("cp");
  for (const auto& v : r.space.of(k))
    out.push_back({{"cp", std::stoi(v)}, {"accum", r.start.with(k, v).accum}});
  return out;
}

}  // namespace

std::string advise_table(const AdviseContext& ctx, const SearchResult& r, int top) {
  const auto& start = r.of(r.start);
  const auto& best = r.of(r.best);
  std::string s = fmt::format(
      "# dmuon_advise (PROJECTED on machine {}, not measured): {}, world {}, dmuon; memory cap "
      "{}\n",
      ctx.machine->name, ctx.model, ctx.world,
      ctx.capacity_gb > 0
          ? fmt::format("{:g} GB per rank ({})", ctx.capacity_gb, ctx.capacity_source)
          : std::string("none (the machine file has no memory_GB)"));
  s += fmt::format(
      "# searched {} candidates by coordinate descent ({} pass(es), {:.0f} s): {} out of memory, "
      "{} rejected, {} dominated (another fits, is no slower and needs no more memory)\n",
      r.evaluated.size(), r.passes, r.wall_s, count_status(r, Status::oom),
      count_status(r, Status::rejected), count_dominated(r));
  if (r.pruned > 0)
    s += fmt::format(
        "# {} candidate(s) not projected: a smaller replicate size at the same knobs is out of "
        "memory (a smaller shard group holds more per rank)\n",
        r.pruned);
  if (r.pruned_cp > 0)
    s += fmt::format(
        "# {} candidate(s) not projected: a smaller --cp at the same knobs is out of memory by "
        "more than its activations (context parallelism splits nothing else)\n",
        r.pruned_cp);
  if (!r.memory_first.empty())
    s += fmt::format("# the start does not fit: the memory-saving knobs ({}) were searched first\n",
                     fmt::join(r.memory_first, ", "));
  if (r.time_limit_hit)
    s += fmt::format(
        "# INCOMPLETE: stopped at the time limit (--time-limit {:g} s) after {} of {} "
        "candidates ({} not projected: each would overrun it; {} fsdp-adamw row(s) skipped); best "
        "so far: {} ({})\n",
        ctx.base->advise.time_limit_s, r.evaluated.size(), r.candidates(), r.skipped,
        r.skipped_baselines, describe_changes(r.best, r.start),
        best.outcome.status == Status::ok
            ? fmt::format("{:.1f} ms, {:.1f} GB", best.outcome.step_ms,
                          static_cast<double>(best.outcome.peak_bytes) / 1e9)
            : step_text(best.outcome));
  s += "# D/A: DMuon step / fsdp-adamw step at the same knobs; dominant: the largest part of "
       "the step\n";
  s += fmt::format("# {:<6} {:>16} {:>7} {:>10} {:>8} {:>6} {:<24} {:>7} {:>6}  {}\n", "rank",
                   "step ms", "MFU %", "tok/s/GPU", "mem GB", "D/A", "dominant", "sites", "idle",
                   "changed against the start");
  int i = 0;
  for (const auto* e : ranked(r, top)) s += row(std::to_string(++i), *e, r.start, ctx.world);
  s += row("start", start, r.start, ctx.world);
  if (best.outcome.status != Status::ok) {
    if (r.time_limit_hit)
      s += fmt::format(
          "# none of the {} projected candidates fits, {} were not projected (time limit): the "
          "closest is {} ({}); raise --time-limit to search them\n",
          r.evaluated.size(), r.skipped, describe_changes(r.best, r.start), best.outcome.error);
    else
      s += fmt::format("# no candidate fits (all {} projected): the closest is {} ({})\n",
                       r.evaluated.size(), describe_changes(r.best, r.start), best.outcome.error);
    return s;
  }
  s += fmt::format("# winner: {}", describe_changes(r.best, r.start));
  if (r.best.key() != r.fastest.key()) {
    const auto& fast = r.of(r.fastest).outcome;
    s += fmt::format(
        " (within {:g} % of the fastest, {} at {:.1f} ms and {:.1f} GB: fewer changed knobs "
        "({} against {}), then less memory, win)",
        100 * r.tolerance, describe_changes(r.fastest, r.start), fast.step_ms,
        static_cast<double>(fast.peak_bytes) / 1e9, changed_knobs(r.best, r.start),
        changed_knobs(r.fastest, r.start));
  }
  if (start.outcome.status == Status::ok)
    s += fmt::format(": {:.1f} ms against the start's {:.1f} ms ({})", best.outcome.step_ms,
                     start.outcome.step_ms,
                     speedup_text(start.outcome.step_ms / best.outcome.step_ms));
  else
    s += fmt::format(" (the start does not run: {})", start.outcome.error);
  s += "\n";
  if (const auto flags = changed_flags(r.best, r.start); !flags.empty())
    s += fmt::format("# run the winner: the start's command line with {}\n", flags);
  return s;
}

nlohmann::json advise_json(const AdviseContext& ctx, const SearchResult& r, int top) {
  nlohmann::json ranked_rows = nlohmann::json::array();
  for (const auto* e : ranked(r, top)) ranked_rows.push_back(evaluated_json(*e, r));
  nlohmann::json all = nlohmann::json::array();
  for (const auto& e : r.evaluated) all.push_back(evaluated_json(e, r));
  return {{"projected", true},
          {"model", ctx.model},
          {"machine", ctx.machine->name},
          {"world_size", ctx.world},
          {"method", "dmuon"},
          {"memory_cap_GB", ctx.capacity_gb},
          {"memory_cap_source", ctx.capacity_source},
          {"passes", r.passes},
          {"time_limit_hit", r.time_limit_hit},
          {"skipped", r.skipped},
          {"skipped_baselines", r.skipped_baselines},
          {"pruned", r.pruned},
          {"pruned_cp", r.pruned_cp},
          {"wall_s", r.wall_s},
          {"start", evaluated_json(r.of(r.start), r)},
          {"winner", evaluated_json(r.of(r.best), r)},
          {"fastest", evaluated_json(r.of(r.fastest), r)},
          {"tolerance", r.tolerance},
          {"memory_first", r.memory_first},
          {"complete", !r.time_limit_hit},
          {"candidates", r.candidates()},
          {"winner_flags", candidate_flags(r.best)},
          {"winner_changed_flags", changed_flags(r.best, r.start)},
          {"micro_batch_values", micro_batch_json(r)},
          {"cp_values", cp_json(r)},
          {"ranked", ranked_rows},
          {"evaluated", all},
          {"oom", count_status(r, Status::oom)},
          {"rejected", count_status(r, Status::rejected)},
          {"dominated", count_dominated(r)}};
}

std::string winner_config(const AdviseContext& ctx, const SearchResult& r) {
  const auto& w = r.best;
  const auto& o = r.of(w).outcome;
  const std::string header = fmt::format(
      "# dmuon_advise winner for {} on {}, world {}: {}\n"
      "# projected step {} ms, peak {:.3g} GB per rank; changed against the start: {}\n"
      "# Project it: dmuon_project --config THIS --machine {}{} --world-size {}\n"
      "# Run it:     {}\n",
      ctx.model, ctx.machine->name, ctx.world, "dmuon",
      o.status == Status::ok ? fmt::format("{:.1f}", o.step_ms) : std::string("-"),
      static_cast<double>(o.peak_bytes) / 1e9, describe_changes(w, r.start), ctx.machine->name,
      // Not dmuon_bench options, so not in the config: the projection needs them said.
      options::projection_only_flags(*ctx.base), ctx.world,
      w.value("cp") == "1"
          ? std::string("mpirun -n N dmuon_bench --config THIS (replicate must divide N)")
          : fmt::format("not with dmuon_bench: --cp {} is projected, not run", w.value("cp")));
  RunOptions winner = w.apply(*ctx.base);
  winner.methods = {engine::Method::dmuon};
  // Absolute: a config's paths are read from wherever the tool runs, not from the config.
  if (!winner.model.topology_file.empty())
    winner.model.topology_file = std::filesystem::absolute(winner.model.topology_file).string();
  // What both tools take: dmuon_project projects it as it is, and dmuon_bench runs it (but for
  // a CP size above 1, which it refuses in one line).
  return options::config_yaml(winner, options::kBench | options::kProject, header);
}

}  // namespace dmuon::apps::advise
