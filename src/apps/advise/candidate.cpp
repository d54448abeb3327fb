#include "advise/candidate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/work/run_shape.hpp"
#include "options/run_option_rules.hpp"

namespace dmuon::apps::advise {
namespace {

// The boundary knob's value is a spec; its flag item carries the mode.
std::string flag_text(const options::RunOption& o, const std::string& value) {
  return o.key_name() == "boundary" ? "strict:" + value : value;
}

bool is_micro_batch(std::size_t k) {
  return knobs()[k]->key_name() == "micro_batch";
}

bool is_cp(std::size_t k) {
  return knobs()[k]->key_name() == "cp";
}

// Knob k's value as a changes list shows it: the micro-batch and the CP size with the accum
// they pair with.
std::string shown_value(const Candidate& c, std::size_t k) {
  return is_micro_batch(k) || is_cp(k) ? fmt::format("{} (accum {})", c.values[k], c.accum)
                                       : c.values[k];
}

// The accum at CP size `to` that keeps the sequences per optimizer step of `accum` at `from`:
// the data-parallel ranks are world / (T x C), so accum / C stays; 0 when it is no integer.
std::int64_t accum_at_cp(std::int64_t accum, std::int64_t from, std::int64_t to) {
  return (accum * to) % from == 0 ? accum * to / from : 0;
}

// Whether the step work splits `seq_len` over `cp` ranks (and, with sequence parallelism, the
// rank's tokens over the TP ranks): work::validate_run_shape's own rule.
bool splits(std::int64_t seq_len, int cp, int tp, bool sequence_parallel) {
  work::RunShape shape;
  shape.seq_len = seq_len;
  shape.tp.size = tp;
  shape.tp.sequence = sequence_parallel;
  shape.cp.size = cp;
  try {
    work::validate_run_shape(shape);
  } catch (const InputError&) {
    return false;
  }
  return true;
}

}  // namespace

const std::vector<const options::RunOption*>& knobs() {
  static const std::vector<const options::RunOption*> k = [] {
    std::vector<const options::RunOption*> out;
    for (const auto& o : options::run_option_table())
      if (o.shown & options::kKnob) out.push_back(&o);
    return out;
  }();
  return k;
}

std::size_t knob(const std::string& key) {
  const auto& k = knobs();
  for (std::size_t i = 0; i < k.size(); ++i)
    if (k[i]->key_name() == key) return i;
  throw std::logic_error("advise: no knob " + key);
}

Candidate Candidate::with(std::size_t k, const std::string& text) const {
  Candidate c = *this;
  c.values.at(k) = text;
  if (is_micro_batch(k) && text != values[k]) {
    // The samples per rank and optimizer step stay: accum x micro-batch.
    const std::int64_t samples = std::stoll(values[k]) * accum, m = std::stoll(text);
    if (m < 1 || samples % m != 0)
      throw std::logic_error(
          fmt::format("advise: micro-batch {} does not divide {} samples per step", m, samples));
    c.accum = static_cast<int>(samples / m);
  }
  if (is_cp(k) && text != values[k]) {
    const std::int64_t a = accum_at_cp(accum, std::stoll(values[k]), std::stoll(text));
    if (a < 1)
      throw std::logic_error(fmt::format("advise: --cp {} from {} leaves no whole accum for {}",
                                         text, values[k], accum));
    c.accum = static_cast<int>(a);
  }
  return c;
}

std::string Candidate::key() const {
  std::string s;
  for (std::size_t k = 0; k < values.size(); ++k)
    s += fmt::format("{}={};", knobs()[k]->key_name(), values[k]);
  return s + fmt::format("accum={};", accum);
}

RunOptions Candidate::apply(const RunOptions& base) const {
  RunOptions o = base;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const auto& row = *knobs()[k];
    const std::string text = flag_text(row, values[k]);
    // A value as given is kept as given (without --seq-len the micro-batch is 0: no value).
    if (text != row.text(base)) row.set(o, {text}, row.flag);
  }
  o.engine.step.accum = accum;
  if (o.workload.seq_len > 0) o.engine.step.tokens = options::step_tokens(o);
  return o;
}

Candidate candidate_of(const RunOptions& o, const std::string& boundary) {
  Candidate c;
  for (const auto* row : knobs())
    c.values.push_back(row->key_name() == "boundary" ? boundary : row->text(o));
  c.accum = o.engine.step.accum;
  return c;
}

int changed_knobs(const Candidate& c, const Candidate& start) {
  int n = 0;
  for (std::size_t k = 0; k < c.values.size(); ++k) n += c.values[k] != start.values[k];
  return n;
}

std::string describe_changes(const Candidate& c, const Candidate& start) {
  std::string s;
  for (std::size_t k = 0; k < c.values.size(); ++k)
    if (c.values[k] != start.values[k])
      s += fmt::format("{}{}={}", s.empty() ? "" : ", ", knobs()[k]->key_name(), shown_value(c, k));
  return s.empty() ? std::string("start") : s;
}

std::vector<std::string> candidate_flags(const Candidate& c) {
  std::vector<std::string> f;
  for (std::size_t k = 0; k < c.values.size(); ++k) {
    if (is_micro_batch(k) && c.values[k] == "0") continue;  // no --seq-len: no micro-batch
    if (is_cp(k) && c.values[k] == "1") continue;  // no context parallelism: dmuon_bench's too
    f.push_back(knobs()[k]->flag + "=" + flag_text(*knobs()[k], c.values[k]));
    if (is_micro_batch(k)) f.push_back(fmt::format("--accum={}", c.accum));
  }
  return f;
}

std::string changed_flags(const Candidate& c, const Candidate& start) {
  std::string s;
  for (std::size_t k = 0; k < c.values.size(); ++k) {
    if (c.values[k] == start.values[k]) continue;
    s += fmt::format("{}{} {}", s.empty() ? "" : " ", knobs()[k]->flag,
                     flag_text(*knobs()[k], c.values[k]));
  }
  // Once, after the knobs that move it (the micro-batch, the CP size).
  if (c.accum != start.accum) s += fmt::format(" --accum {}", c.accum);
  return s;
}

std::vector<std::string> ep_values(const model::ModuleTree& tree, int world, int domain) {
  const auto largest = [&](int cap) {
    for (int e = std::min(cap, work::kMaxEp); e > 1; --e)
      if (world % e == 0 && model::experts_split_over(tree, e)) return e;
    return 1;
  };
  std::vector<std::string> out = {"1"};
  for (const int e : {largest(std::min(world, domain)), largest(world)})
    if (e > 1 && out.back() != std::to_string(e)) out.push_back(std::to_string(e));
  return out;
}

std::vector<std::int64_t> micro_batch_values(std::int64_t m, int accum) {
  std::vector<std::int64_t> out = {m};
  if (m <= 1) return out;
  // m / d for d = 2, 4 and m: halves, quarters, one sample per micro-step.
  for (const std::int64_t d : {std::int64_t{2}, std::int64_t{4}, m}) {
    if (m % d != 0 || accum * d > engine::kMaxAccum) continue;
    if (std::find(out.begin(), out.end(), m / d) == out.end()) out.push_back(m / d);
  }
  return out;
}

std::vector<int> cp_values(int start, int accum, std::int64_t seq_len, int world, int tp,
                           bool sequence_parallel) {
  std::vector<int> out = {start};
  for (int c = 1; c <= work::kMaxCp; c *= 2) {
    // Whole chunks (2C per sequence; with SP, each CP rank's tokens over the TP ranks too),
    // whole CP groups in the world, and an accum in range that keeps the step's sequences.
    const std::int64_t a = accum_at_cp(accum, start, c);
    if (c == start || world % (c * tp) != 0 || a < 1 || a > engine::kMaxAccum ||
        !splits(seq_len, c, tp, sequence_parallel))
      continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace dmuon::apps::advise
