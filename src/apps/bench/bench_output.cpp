#include "bench/bench_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "bench/samples.hpp"
#include "dmuon/engine/report.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/results/mann_whitney.hpp"

namespace dmuon::apps::bench {
namespace {

using engine::Phase;

// The header's --ep words: E = G each rank's own experts; E < G their expert groups; with
// --seq-len the routed tokens' all-to-alls.
std::string ep_header(int ep, int shard, bool tokens) {
  if (ep == 1) return "";
  const std::string exchange =
      tokens ? fmt::format("; the routed tokens' all-to-alls over EP groups of {} ranks", ep) : "";
  if (ep == shard)
    return fmt::format(
        "  --ep {}: each rank's own experts, whole, no collective{} "
        "(dmuon_inspect --ep says which)",
        ep, exchange);
  return fmt::format(
      "  --ep {}: each rank's experts shared by an expert group of G/E = {} "
      "ranks, as the row shares the rest{} (dmuon_inspect --ep says which)",
      ep, shard / ep, exchange);
}

std::string strategy_list(const RunOptions& o) {
  std::string s;
  for (auto st : o.owner_strategies)
    s += (s.empty() ? "" : ",") + std::string(partition::strategy_name(st));
  return s;
}

constexpr std::size_t kWidth = 160;
constexpr std::size_t kLabelWidth = 22;
constexpr std::size_t kStepWidth = 18;  // "1300.9 (1061-1652)": the table stays within kWidth

double ph(const engine::RunResult& r, Phase p) {
  return r.phases_ms[static_cast<std::size_t>(p)];
}
double adamw_step_ms(const std::vector<BenchRun>& runs) {
  for (const auto& r : runs)
    if (r.ok() && r.method == engine::Method::fsdp_adamw) return ph(r.result, Phase::step);
  return 0;
}

// The boundary column: the sweep word for aliases ("recommended"), else the spec; long specs
// abbreviated (the legend below the table gives them in full) unless --wide.
std::string row_label(const BenchRun& run, bool wide) {
  if (run.baseline) return "-";
  const auto& b = run.boundary;
  const std::string label = b.word != b.spec ? b.word : b.spec;
  return wide ? b.label() : clip(label, kLabelWidth);
}

// Each row's step time against the fastest measured dmuon row's: the ratio of medians, and
// whether a one-sided Mann-Whitney U test says the row is slower (p < alpha) — a mark "~"
// means the difference is not significant (noise could explain it), "best" is the fastest.
struct VsBest {
  std::string text = "-";
  double ratio = 0;
  double p = 1;
  bool significant = false;
  bool best = false;
};

// A row whose boundary left dedicated parameters to the lenient fallback did not run the
// boundary it names: it can be fastest, but it is never "best" (the verdict says what it gave).
bool degraded(const BenchRun& r) {
  return std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) {
    return w.find("[lenient-fallback]") != std::string::npos;
  });
}

bool measured_dmuon(const BenchRun& r) {
  return r.ok() && r.method == engine::Method::dmuon && !r.result.rank_phases_ms.empty();
}

// The fastest measured dmuon row, among the undegraded ones when `clean`; -1 when none.
int fastest_dmuon(const std::vector<BenchRun>& runs, bool clean) {
  int best = -1;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    if (!measured_dmuon(r) || (clean && degraded(r))) continue;
    if (best < 0 || ph(r.result, Phase::step) < ph(runs[best].result, Phase::step))
      best = static_cast<int>(i);
  }
  return best;
}

std::vector<VsBest> vs_best(const std::vector<BenchRun>& runs, int world, bool projected) {
  std::vector<VsBest> out(runs.size());
  int best = fastest_dmuon(runs, true);
  if (best < 0) best = fastest_dmuon(runs, false);  // every row degraded: say so below
  if (best < 0) return out;
  const auto ref = phase_samples_ms(runs[best].result, Phase::step, world);
  const double ref_median = ph(runs[best].result, Phase::step);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    if (!measured_dmuon(r)) continue;
    auto& v = out[i];
    if (static_cast<int>(i) == best) {
      v.text = "best";
      v.best = true;
      v.ratio = 1;
      continue;
    }
    const auto mine = phase_samples_ms(r.result, Phase::step, world);
    v.ratio = ref_median > 0 ? ph(r.result, Phase::step) / ref_median : 0;
    if (projected) {  // deterministic: the ratio is the answer, there is no noise to test
      v.text = fmt::format("{:.2f}", v.ratio);
      continue;
    }
    if (!ref.empty() && !mine.empty() &&
        results::min_one_sided_p(ref.size(), mine.size()) < kTableAlpha) {
      v.p = results::mann_whitney_u(ref, mine).p_greater;
      v.significant = v.p < kTableAlpha;
    }
    v.text = fmt::format("{:.2f}{}", v.ratio, v.significant ? " " : "~");
  }
  return out;
}

// The warning kinds a row carries ("swallowed-repeats, idle-ranks"), each once.
std::string warning_kinds(const BenchRun& r) {
  std::vector<std::string> kinds;
  for (const auto& w : r.warnings) {
    const auto open = w.find('[');
    const auto close = w.find(']', open);
    if (open == std::string::npos || close == std::string::npos) continue;
    auto k = w.substr(open + 1, close - open - 1);
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(std::move(k));
  }
  return fmt::format("{}", fmt::join(kinds, ", "));
}

// What the verdict's row carries, and the faster row it passed over because that row is
// degraded: the verdict never names a warned or degraded row without saying so.
std::string verdict_caveats(const std::vector<BenchRun>& runs, int chosen) {
  const auto& c = runs[static_cast<std::size_t>(chosen)];
  std::string s;
  if (degraded(c))
    s += " [degraded: every measured dmuon row left parameters to the lenient fallback]";
  else if (!c.warnings.empty())
    s += fmt::format(" [carries {} warning{}: {}]", c.warnings.size(),
                     c.warnings.size() == 1 ? "" : "s", warning_kinds(c));
  const int fastest = fastest_dmuon(runs, false);
  if (fastest >= 0 && fastest != chosen) {
    const auto& f = runs[static_cast<std::size_t>(fastest)];
    s += fmt::format("; boundary '{}' ({}) ran {:.3f}x faster but is degraded ({}), not chosen",
                     clip(f.boundary.label(), 40), f.mode(),
                     ph(c.result, Phase::step) / ph(f.result, Phase::step), warning_kinds(f));
  }
  return s;
}

// The sweep's answer in one line: the fastest dmuon row against the default boundary's (the
// one-sided Mann-Whitney U test of the table, with what n can show) and against AdamW.
std::string verdict_line(const std::vector<BenchRun>& runs, const std::vector<VsBest>& best,
                         int world, bool projected) {
  int b = -1, def = -1, adamw = -1;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    if (!r.ok() || r.result.rank_phases_ms.empty()) continue;
    if (best[i].best) b = static_cast<int>(i);
    if (!r.baseline && r.method == engine::Method::dmuon && r.boundary.word == "default" && def < 0)
      def = static_cast<int>(i);
    if (r.baseline && r.method == engine::Method::fsdp_adamw) adamw = static_cast<int>(i);
  }
  if (b < 0) return "";
  const auto& br = runs[static_cast<std::size_t>(b)];
  const double step = ph(br.result, Phase::step);
  std::string s = fmt::format("# verdict: fastest undegraded dmuon row: boundary '{}' ({})",
                              clip(br.boundary.label(), 60), br.mode());
  if (def >= 0 && def != b) {
    const auto ref = phase_samples_ms(br.result, Phase::step, world);
    const auto other =
        phase_samples_ms(runs[static_cast<std::size_t>(def)].result, Phase::step, world);
    const double ratio = ph(runs[static_cast<std::size_t>(def)].result, Phase::step) / step;
    s += fmt::format(", {:.2f}x faster than the default boundary", ratio);
    if (projected) {
      s += " (projected)";
    } else if (ref.size() < 2 || other.size() < 2) {
      s += " (one sample each: no test)";
    } else {
      const double floor = results::min_one_sided_p(ref.size(), other.size());
      const double p = results::mann_whitney_u(ref, other).p_greater;
      if (floor >= kTableAlpha)
        s += fmt::format(
            " (n = {} vs {}: the smallest p is {:.3f} >= {}, no test can be "
            "significant; run more --steps or --repeats)",
            ref.size(), other.size(), floor, kTableAlpha);
      else
        s += fmt::format(" ({}: one-sided Mann-Whitney p = {:.3g}, n = {} vs {})",
                         p < kTableAlpha ? "significant" : "not significant", p, ref.size(),
                         other.size());
    }
  } else if (def == b) {
    s += " = the default boundary";
  }
  s += verdict_caveats(runs, b);
  if (adamw >= 0 && step > 0)
    s += fmt::format("; step {:.2f}x fsdp-adamw's",
                     step / ph(runs[static_cast<std::size_t>(adamw)].result, Phase::step));
  return s + "\n";
}

// Per row and collective kind: calls, message bytes and the bandwidth achieved while the kind
// was busy, in the nccl-tests sense (comm/bus_bandwidth.hpp, engine/exec/in_flight_clock.hpp).
// Appended to `s` (comment lines wrapped at `width`; the legend once per style.shown); nothing
// when no row measured it (CUDA runs). Projected: the replay's spans (project/replay.hpp).
void append_collectives_block(std::string& s, const std::vector<BenchRun>& runs, bool wide,
                              const TableStyle& style, std::size_t width) {
  const auto measured = [](const engine::KindResult& k) {
    return k.calls_per_step > 0 && std::isfinite(k.algbw_gbps());
  };
  bool any = false;
  for (const auto& run : runs)
    if (run.ok())
      for (const auto& k : run.result.kinds) any = any || measured(k);
  if (!any) return;
  const std::string busy =
      style.projected
          ? "busy = ms with one of the kind's collectives running in the replay, from its last "
            "participant's join to its end (the slowest instance of the communicator)"
          : "busy = ms with one of the kind's collectives in flight, issue to observed "
            "completion (per step the slowest rank; median over steps; overlapped with compute, "
            "so an upper bound)";
  const std::string legend = fmt::format(
      "# collectives per step, per row and kind (nccl-tests sense): S = message bytes (the full "
      "buffer for all_gather/reduce_scatter), {}, algbw = S / busy, busbw = algbw x bus factor "
      "(2(n-1)/n all_reduce, (n-1)/n all_gather/reduce_scatter, 1 broadcast/reduce)",
      busy);
  if (!style.shown || style.shown->insert(legend).second) s += wrap_comment(legend, width);
  const std::string lw = std::to_string(wide ? 40 : kLabelWidth);
  const std::string fmt_row =
      "  {:<" + lw + "} {:<10} {:<22} {:>3} {:>6} {:>10} {:>9} {:>10} {:>10}\n";
  s += fmt::format("# {:<" + lw + "} {:<10} {:<22} {:>3} {:>6} {:>10} {:>9} {:>10} {:>10}\n",
                   "boundary", "method", "collective", "n", "calls", "S MB", "busy ms", "algbw",
                   "busbw");
  for (const auto& run : runs) {
    if (!run.ok()) continue;
    const auto& r = run.result;
    for (std::size_t ch = 0; ch < engine::kChannelCount; ++ch) {
      const auto& k = r.kinds[ch];
      if (k.calls_per_step == 0) continue;
      const bool m = measured(k);
      s += fmt::format(
          fmt_row, row_label(run, wide), engine::method_name(run.method), engine::channel_name(ch),
          k.group_size, k.calls_per_step, fmt::format("{:.3f}", k.message_bytes / 1e6),
          m ? fmt::format("{:.2f}", k.in_flight_ms) : "-", m ? rate_text(k.algbw_gbps()) : "-",
          m ? rate_text(k.busbw_gbps(engine::channel_kind(ch))) : "-");
    }
  }
}

}  // namespace

std::string clip(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string wrap_comment(const std::string& text, std::size_t width) {
  if (width == 0 || text.size() <= width) return text + "\n";
  std::string out, line;
  std::size_t pos = 0;
  const std::string indent = "#   ";
  std::string current;
  while (pos < text.size()) {
    std::size_t next = text.find(' ', pos);
    if (next == std::string::npos) next = text.size();
    const std::string word = text.substr(pos, next - pos);
    if (!current.empty() && current.size() + 1 + word.size() > width) {
      out += current + "\n";
      current = indent + word;
    } else {
      current += (current.empty() ? "" : " ") + word;
    }
    pos = next + 1;
  }
  if (!current.empty()) out += current + "\n";
  return out;
}

std::string spread_text(const Spread& s, std::size_t width) {
  if (s.samples == 0) return "-";
  if (s.samples == 1) return fmt::format("{:.2f}", s.median);
  // Fewer digits before less information: the range, then the range's upper side alone.
  std::string t = fmt::format("{:.1f} ({:.0f}-{:.0f})", s.median, s.min, s.max);
  if (t.size() > width) t = fmt::format("{:.0f} ({:.0f}-{:.0f})", s.median, s.min, s.max);
  if (t.size() > width && s.median > 0)
    t = fmt::format("{:.0f} (max +{:.0f}%)", s.median, 100 * (s.max / s.median - 1));
  return t;
}

int failures(const std::vector<BenchRun>& runs) {
  int n = 0;
  for (const auto& r : runs)
    if (r.ok()) n += !r.result.audit_ok + (r.result.checked && !r.result.check_passed);
  return n;
}

std::string throughput_lines(const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                             double model_flops_per_token, const char* convention) {
  // --pp: every stage sees the same data; the data-parallel world is a stage's.
  const int dp = world / std::max(1, o.plan.tp) / std::max(1, o.workload.pp);
  const auto tokens = static_cast<double>(o.engine.step.global_samples(dp));
  std::string s;
  for (const auto& run : runs) {
    if (!run.ok() || run.result.rank_phases_ms.empty()) continue;
    const double step_s = ph(run.result, Phase::step) * 1e-3;
    if (!(step_s > 0)) continue;
    s += fmt::format("# throughput ({}{}): step {:.2f} ms, {:.4g} tokens/s, {:.4g} per rank",
                     engine::method_name(run.method),
                     run.baseline ? "" : ", " + clip(run.boundary.label(), 40), step_s * 1e3,
                     tokens / step_s, tokens / step_s / world);
    if (model_flops_per_token > 0)
      s += fmt::format(", {:.4g} model TFLOP/s per rank ({})",
                       model_flops_per_token * tokens / step_s / world / 1e12, convention);
    // MFU needs a peak FLOP/s, which only a machine model has (dmuon_project); a host has none.
    const auto& mem = run.result.memory_measured;
    if (mem.measured)
      s += fmt::format(", peak memory {} per rank (rank {}, {})",
                       bytes_text(static_cast<double>(mem.peak_bytes)), mem.rank, mem.phase);
    s += "\n";
  }
  return s;
}

namespace {

// The table's header lines: what ran (or was projected), where, and how to read the columns.
// The global batch as meant: with --seq-len the engine's per-rank count is tokens (seq-len x
// micro-batch x accum); without it, samples of one token each (the parameter work alone).
std::string batch_text(const RunOptions& o, int world) {
  const auto& wl = o.workload;
  const int dp = world / o.plan.tp;
  const std::int64_t units = o.engine.step.global_samples(dp);
  const char* who = o.plan.tp > 1 ? "DP rank; its TP group shares them" : "rank";
  const int accum = o.engine.step.accum;
  if (wl.seq_len > 0)
    return fmt::format(
        "# global batch {} tokens = {} samples of {} tokens ({} per {}: micro-batch {} x "
        "seq-len {}{}{})",
        units, units / wl.seq_len, wl.seq_len, units / dp, who, wl.micro_batch, wl.seq_len,
        wl.cp > 1 ? fmt::format(" / --cp {}", wl.cp) : std::string(),
        accum > 1 ? fmt::format(" x {} micro-steps", accum) : std::string());
  return fmt::format(
      "# global batch {} samples of one token ({} per {}; the parameter work alone: no "
      "--seq-len)",
      units, units / dp, who);
}

// Where the run ran: hosts, CPU and BLAS, the transport settings (none for a projection).
std::string host_lines(const HostInfo& host, std::size_t width) {
  std::string out;
  std::vector<std::string> hosts;
  for (const auto& h : host.hostnames)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  // No host line where nothing ran here (dmuon_project's projected tables).
  if (!hosts.empty()) {
    const std::string where =
        hosts.size() == 1 ? fmt::format("{} ({} ranks)", hosts.front(), host.hostnames.size())
                          : fmt::format("{} hosts ({}, ...; {} ranks)", hosts.size(), hosts.front(),
                                        host.hostnames.size());
    out += wrap_comment(
        fmt::format("# host {}: {}; BLAS {} kernels; sgemm {}^3 {:.1f} GFLOP/s per rank (median "
                    "over ranks, "
                    "all at once)",
                    where, host.blas.cpu_model, host.blas.core.empty() ? "unknown" : host.blas.core,
                    host.sgemm_size, host.sgemm_gflops),
        width);
    out += wrap_comment("# transport " + (host.transport_settings.empty()
                                              ? std::string("(MPI/NCCL defaults: nothing set)")
                                              : host.transport_settings),
                        width);
  }
  if (!host.warning.empty()) out += wrap_comment("# WARNING: " + host.warning, width);
  return out;
}

// How to read the table's columns.
std::string column_legend(const RunOptions& o, const TableStyle& style, const char* bytes_unit) {
  const auto& e = o.engine;
  const std::string columns = fmt::format(
      "{} = bytes per rank per step (max over ranks), {}; the audit compares it with the formula "
      "per rank and kind. bcast = broadcast + all_gather calls, red = reduce + reduce_scatter + "
      "all_reduce (HSDP: row and column groups together). Baselines (boundary '-') run once",
      bytes_unit, style.projected ? "counted from the replayed batches" : "measured");
  if (style.projected)
    return fmt::format(
        "# times in ms of the projected step, the slowest rank (the replay is deterministic: one "
        "step per row); optim, exposed, sync (the wait at the step-start barrier for the slowest "
        "rank, outside step). vs best: step / the fastest undegraded dmuon row's. {}",
        columns);
  return fmt::format(
      "# times in ms, per sample (a measured step of a repeat: {} per row) the slowest "
      "rank; step: median (min-max); optim, exposed, sync: medians (sync: the wait at the "
      "step-start barrier for the slowest rank, outside step). vs best: step median / the "
      "fastest undegraded dmuon row's, ~ = not significantly slower (one-sided Mann-Whitney U, p "
      ">= {}). {}",
      e.run.steps * o.repeats, kTableAlpha, columns);
}

std::string table_header(const model::Topology& topo, const RunOptions& o, int world,
                         const std::string& sweep_source, const HostInfo& host,
                         const TableStyle& style, const char* bytes_unit, std::size_t width) {
  const auto& e = o.engine;
  std::string s;
  const auto line = [&](const std::string& text) { s += wrap_comment(text, width); };
  const int replicate = o.plan.partition.replicate, tp = o.plan.tp;
  line(fmt::format("# {}  topology {} (preset {})  world {} = R {} x G {}{}{}{}", style.title,
                   topo.name, topo.preset.empty() ? "file" : topo.preset, world, replicate,
                   world / replicate / tp, tp > 1 ? fmt::format(" x T {}", tp) : "",
                   replicate > 1 ? " (HSDP)" : "",
                   ep_header(o.plan.ep, world / replicate / tp, o.workload.seq_len > 0)));
  line(fmt::format(
      "# boundary sweep: {}  owner strategy {}  reshard {}  grad reduce {}  prefetch {}  "
      "compute {}",
      sweep_source, strategy_list(o),
      o.baseline_reshard && *o.baseline_reshard != e.step.reshard
          ? fmt::format("{} (baselines {})", plan::reshard_name(e.step.reshard),
                        plan::reshard_name(*o.baseline_reshard))
          : std::string(plan::reshard_name(e.step.reshard)),
      plan::grad_reduce_name(e.step.grad_reduce), e.step.prefetch,
      engine::compute_name(e.step.compute)));
  line(
      fmt::format("# device {}  comm dtype {}  reduce dtype {}{}  Newton-Schulz {}{}  optimizer "
                  "pipeline {}",
                  engine::device_name(e.backend.device), engine::dtype_flag_name(e.step.wire),
                  engine::dtype_flag_name(e.step.reduce_dtype()),
                  e.step.param != kernels::Dtype::f32
                      ? fmt::format("  param dtype {} (masters, optimizer state, gradients)",
                                    engine::dtype_flag_name(e.step.param))
                      : std::string(),
                  kernels::to_string(e.backend.ns),
                  e.backend.device == engine::Device::cuda
                      ? fmt::format(" in {}", engine::dtype_flag_name(e.backend.ns_dtype))
                      : std::string(" in fp32"),
                  engine::optimizer_pipeline_name(e.step.pipeline)));
  const std::string batch = batch_text(o, world);
  line(style.projected
           ? batch
           : fmt::format("{}  steps {} (+{} warmup) x {} repeat{}  seed {}", batch, e.run.steps,
                         e.run.warmup, o.repeats, o.repeats == 1 ? "" : "s", e.run.seed));
  if (e.step.clip_norm > 0 || e.step.accum > 1)
    line(fmt::format("# gradient clipping {}  accumulation {} micro-step{} per step",
                     e.step.clip_norm > 0
                         ? fmt::format("--clip-norm {} ({}-norm)", e.step.clip_norm,
                                       engine::clip_norm_type_name(e.step.clip_norm_type))
                         : std::string("off"),
                     e.step.accum, e.step.accum == 1 ? "" : "s"));
  s += host_lines(host, width);
  const auto legend = [&](const std::string& text) {  // once per `style.shown`
    if (!style.shown || style.shown->insert(text).second) line(text);
  };
  legend(column_legend(o, style, bytes_unit));
  return s;
}

// The unit of the bytes column: the largest decimal unit under which every row stays < 10^4.
std::pair<const char*, double> bytes_unit(const std::vector<BenchRun>& runs) {
  double most = 0;
  for (const auto& run : runs)
    if (run.ok()) most = std::max(most, static_cast<double>(run.result.bytes_measured_total()));
  if (most < 1e10) return {"MB", 1e6};
  if (most < 1e13) return {"GB", 1e9};
  return {"TB", 1e12};
}

std::string table_rows(const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                       const std::vector<VsBest>& best, std::pair<const char*, double> unit) {
  std::string s;
  const std::string lw = std::to_string(o.wide ? 40 : kLabelWidth);
  // The check column only where a row ran --check: the table fits 160 columns.
  const bool checked = std::any_of(runs.begin(), runs.end(),
                                   [](const BenchRun& r) { return r.ok() && r.result.checked; });
  const std::string check_col = checked ? " {:>5}\n" : "{}\n";
  const std::string hdr = "# {:<" + lw +
                          "} {:<7} {:<10} {:<10} {:<8} {:>5} {:>5} {:>5} {:>5} {:>9} {:>5} {:>18} "
                          "{:>7} {:>7} {:>7} {:>6} {:>6}" +
                          check_col;
  s += fmt::format(hdr, "boundary", "mode", "method", "owners", "status", "sites", "hooks", "bcast",
                   "red", unit.first, "audit", "step ms", "vs best", "optim", "exposed", "sync",
                   "/adamw", checked ? "check" : "");
  const std::string row = "  {:<" + lw +
                          "} {:<7} {:<10} {:<10} {:<8} {:>5} {:>5} {:>5} {:>5} {:>9.3f} {:>5} "
                          "{:>18} {:>7} {:>7.2f} {:>7.2f} {:>6.2f} {:>6}" +
                          check_col;
  const double adamw = adamw_step_ms(runs);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const std::string label = row_label(run, o.wide);
    if (!run.ok()) {
      const std::string head =
          fmt::format("  {:<" + lw + "} {:<7} {:<10} {:<10} {:<8} ", label, run.mode(),
                      engine::method_name(run.method), run.owner_label(), run.status);
      s +=
          head +
          (o.wide ? run.error : clip(run.error, kWidth > head.size() ? kWidth - head.size() : 20)) +
          "\n";
      continue;
    }
    const auto& r = run.result;
    const double step = ph(r, Phase::step);
    s += fmt::format(
        row, label, run.mode(), engine::method_name(run.method), run.owner_label(), run.status,
        r.hook_sites, r.hook_calls_per_step, engine::weight_calls_per_step(r),
        engine::reduce_calls_per_step(r),
        static_cast<double>(r.bytes_measured_total()) / unit.second, r.audit_ok ? "OK" : "FAIL",
        spread_text(phase_spread(r, Phase::step, world), kStepWidth), best[i].text,
        ph(r, Phase::optimizer_ns) + ph(r, Phase::optimizer_other), ph(r, Phase::exposed_comm),
        ph(r, Phase::step_sync), adamw > 0 ? fmt::format("{:.2f}", step / adamw) : std::string("-"),
        !checked     ? ""
        : !r.checked ? "-"
                     : (r.check_passed ? "OK" : "FAIL"));
  }
  return s;
}

// Boundary legends and degradation warnings, each once (per table, or per `style.shown`).
std::string boundary_notes(const RunOptions& o, const std::vector<BenchRun>& runs,
                           const TableStyle& style, std::size_t width) {
  std::set<std::string> local;
  std::set<std::string>& shown = style.shown ? *style.shown : local;
  std::string s;
  const auto note = [&](const std::string& text) {
    if (shown.insert(text).second) s += wrap_comment(text, width);
  };
  // The spec behind every alias or abbreviated label.
  for (const auto& run : runs) {
    if (run.baseline) continue;
    const std::string label = row_label(run, o.wide);
    if (!o.wide && label != run.boundary.spec)
      note(fmt::format("# boundary {} = {}", label, run.boundary.spec));
  }
  // The baselines' FSDP units: their own rule, never the swept boundary.
  std::vector<std::string> baselines;
  std::string units;
  for (const auto& run : runs)
    if (run.baseline) {
      baselines.push_back(engine::method_name(run.method));
      units = run.units;
    }
  if (!baselines.empty())
    note(fmt::format("# baselines ({}): FSDP units = {}, whatever the sweep (--baseline-units)",
                     fmt::join(baselines, ", "), units));
  // A baseline out of memory: what makes it fit (dmuon_project).
  for (const auto& run : runs)
    if (run.baseline && run.status == "oom")
      for (const auto& r : run.remedies)
        s += wrap_comment(fmt::format("# [{}] oom; {}", engine::method_name(run.method), r), width);
  // Warnings grouped per boundary row (the findings are the boundary's, not the strategy's).
  for (const auto& run : runs) {
    if (run.baseline) continue;
    const std::string head = fmt::format("{} ({})", run.boundary.label(), run.boundary.mode());
    // dmuon_project marks a row over the device memory "oom" (its error says by how much):
    // that one is the world's own, always shown.
    if (run.status == "oom") {
      s += wrap_comment(fmt::format("# [{}] {}", head, run.error), width);
      for (const auto& r : run.remedies)
        s += wrap_comment(fmt::format("# [{}]   {}", head, r), width);
    } else if (!run.ok())
      note(fmt::format("# [{}] rejected at set-up: {}", head, run.error));
    for (const auto& w : run.warnings) note(fmt::format("# [{}] {}", head, w));
    if (!run.no_suggestion.empty()) note(fmt::format("# [{}] {}", head, run.no_suggestion));
    if (!run.suggestion.empty()) note(fmt::format("# [{}] {}", head, run.suggestion));
  }
  return s;
}

// Per row: failed audits, --check verdicts, the TP exchange, --accum's micro-step.
std::string run_notes(const RunOptions& o, const std::vector<BenchRun>& runs, std::size_t width) {
  std::string s;
  const auto line = [&](const std::string& text) { s += wrap_comment(text, width); };
  for (const auto& run : runs) {
    if (!run.ok()) continue;
    const auto& r = run.result;
    const std::string who = fmt::format(
        "{}{}", engine::method_name(run.method),
        run.baseline ? "" : fmt::format(", {} ({})", run.boundary.label(), run.boundary.mode()));
    if (!r.audit_ok) line(fmt::format("# audit FAILED ({}): {}", who, r.audit_message));
    if (!r.audit_ok)
      line(fmt::format("# ({}) MB measured {:.6f}, formula {:.6f}", who,
                       static_cast<double>(r.bytes_measured_total()) / 1e6,
                       static_cast<double>(r.bytes_formula_total()) / 1e6));
    if (r.checked)
      line(fmt::format("# check {} ({}): max relative error {:.3e} (tolerance {:.1e}){}",
                       r.check_passed ? "OK" : "FAILED", who, r.max_rel_error, r.check_tolerance,
                       r.worst_param.empty() ? "" : ", worst " + r.worst_param));
    if (r.tp > 1) {
      const auto& g = r.kinds[engine::channel_index(CommGroup::tp, comm::CollectiveKind::gather)];
      const auto& sc = r.kinds[engine::channel_index(CommGroup::tp, comm::CollectiveKind::scatter)];
      line(fmt::format(
          "# tp {} ({}): MB = DP collectives on local shards + the TP exchange; TP gather {:.6f} "
          "MB, scatter {:.6f} MB per rank per step (max), formula {:.6f} / {:.6f}",
          r.tp, who, static_cast<double>(g.bytes_measured) / 1e6,
          static_cast<double>(sc.bytes_measured) / 1e6, static_cast<double>(g.bytes_formula) / 1e6,
          static_cast<double>(sc.bytes_formula) / 1e6));
    }
    if (r.checked && !r.check_note.empty())
      line(fmt::format("# check note ({}): {}", who, r.check_note));
    if (o.engine.step.accum > 1)
      line(fmt::format("# per micro-step ({}): {:.3f} ms (step {:.3f} ms / {} micro-steps)", who,
                       ph(r, Phase::step) / o.engine.step.accum, ph(r, Phase::step),
                       o.engine.step.accum));
  }
  return s;
}

}  // namespace

std::string bytes_text(double bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (u < 5 && std::fabs(bytes) >= 1000) {
    bytes /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

std::string rate_text(double gbps) {
  return bytes_text(gbps * 1e9) + "/s";
}

std::string format_table(const model::Topology& topo, const std::vector<plan::Plan>& /*plans*/,
                         const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                         const std::string& sweep_source, const HostInfo& host,
                         const TableStyle& style) {
  const std::size_t width = o.wide ? 0 : kWidth;
  const auto unit = bytes_unit(runs);
  const auto best = vs_best(runs, world, style.projected);
  std::string s = table_header(topo, o, world, sweep_source, host, style, unit.first, width);
  s += table_rows(o, world, runs, best, unit);
  append_collectives_block(s, runs, o.wide, style, width);
  s += boundary_notes(o, runs, style, width);
  s += run_notes(o, runs, width);
  s += style.before_verdict;
  const int failed = failures(runs);
  s += fmt::format("# Failed audits and checks : {} {}\n", failed, failed == 0 ? "OK" : "FAILED");
  s += verdict_line(runs, best, world, style.projected);  // the last word
  return s;
}

nlohmann::json to_json(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                       const RunOptions& o, int world, const std::vector<BenchRun>& runs,
                       const HostInfo& host) {
  const auto& e = o.engine;
  nlohmann::json j;
  j["topology"] = topo.name;
  j["preset"] = topo.preset;
  j["world_size"] = world;
  j["owner_strategy"] = fmt::format("{}", strategy_list(o));
  j["replicate"] = o.plan.partition.replicate;
  j["tp"] = o.plan.tp;
  j["ep"] = o.plan.ep;
  j["reshard"] = plan::reshard_name(e.step.reshard);
  j["grad_reduce"] = plan::grad_reduce_name(e.step.grad_reduce);
  j["prefetch"] = e.step.prefetch;
  j["compute"] = engine::compute_name(e.step.compute);
  j["device"] = engine::device_name(e.backend.device);
  j["comm_dtype"] = engine::dtype_flag_name(e.step.wire);
  j["reduce_dtype"] = engine::dtype_flag_name(e.step.reduce_dtype());
  j["ns"] = std::string(kernels::to_string(e.backend.ns));
  j["ns_dtype"] = e.backend.device == engine::Device::cuda
                      ? engine::dtype_flag_name(e.backend.ns_dtype)
                      : "fp32";
  j["optimizer_pipeline"] = engine::optimizer_pipeline_name(e.step.pipeline);
  j["clip_norm"] = e.step.clip_norm;  // 0: off
  j["clip_norm_type"] = engine::clip_norm_type_name(e.step.clip_norm_type);
  j["accum"] = e.step.accum;
  j["steps"] = e.run.steps;
  j["warmup"] = e.run.warmup;
  j["repeats"] = o.repeats;
  j["seed"] = e.run.seed;
  j["host"] = {{"hostnames", host.hostnames},
               {"cpu_model", host.blas.cpu_model},
               {"cpu_features", host.blas.cpu_features},
               {"blas_library", host.blas.library},
               {"blas_core", host.blas.core},
               {"sgemm_gflops", host.sgemm_gflops},
               {"sgemm_size", host.sgemm_size},
               {"warning", host.warning},
               {"transport_settings", host.transport_settings}};
  j["runs"] = nlohmann::json::array();
  const double adamw = adamw_step_ms(runs);
  const auto best = vs_best(runs, world, false);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    nlohmann::json x = nlohmann::json::object();
    if (run.ok()) {
      const auto& p = plans.at(static_cast<std::size_t>(run.plan_index));
      x = engine::to_json(topo, p, e, {run.result})["runs"][0];
      if (adamw > 0) x["ratio_vs_fsdp_adamw"] = ph(run.result, Phase::step) / adamw;
      const auto spread = [](const Spread& v) {
        return nlohmann::json{
            {"min", v.min}, {"median", v.median}, {"max", v.max}, {"samples", v.samples}};
      };
      x["step_ms_spread"] = spread(phase_spread(run.result, Phase::step, world));
      x["optimizer_ms_spread"] = spread(optimizer_spread(run.result, world));
      x["step_ms_samples"] = phase_samples_ms(run.result, Phase::step, world);
      x["micro_step_ms"] = ph(run.result, Phase::step) / e.step.accum;  // step_ms / accum
      if (!run.baseline && best[i].ratio > 0)
        x["vs_best"] = {{"ratio", best[i].ratio},
                        {"best", best[i].best},
                        {"significant", best[i].significant},
                        {"p", best[i].p}};
    }
    x["method"] = engine::method_name(run.method);
    x["routes"] = run.config.routes;  // --route items, in order (empty: the dedication rule)
    x["baseline"] = run.baseline;
    x["boundary"] = run.baseline ? "" : run.boundary.word;
    x["boundary_spec"] = run.baseline ? "" : run.boundary.spec;
    if (run.baseline) x["baseline_units"] = run.units;
    if (!run.remedies.empty()) x["fits_with"] = run.remedies;
    x["strict"] = run.baseline ? true : run.boundary.strict;
    x["owner_strategy"] = run.baseline ? "" : run.owner_label();
    x["status"] = run.status;
    if (!run.ok()) x["error"] = run.error;
    x["warnings"] = run.warnings;
    if (!run.suggestion.empty()) x["suggestion"] = run.suggestion;
    j["runs"].push_back(x);
  }
  j["failures"] = failures(runs);
  j["passed"] = failures(runs) == 0;
  return j;
}

}  // namespace dmuon::apps::bench
