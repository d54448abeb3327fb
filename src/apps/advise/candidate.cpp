#include "advise/candidate.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace dmuon::apps::advise {
namespace {

// The boundary knob's value is a spec; its flag item carries the mode.
std::string flag_text(const options::RunOption& o, const std::string& value) {
  return o.key_name() == "boundary" ? "strict:" + value : value;
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
  return c;
}

std::string Candidate::key() const {
  std::string s;
  for (std::size_t k = 0; k < values.size(); ++k)
    s += fmt::format("{}={};", knobs()[k]->key_name(), values[k]);
  return s;
}

RunOptions Candidate::apply(const RunOptions& base) const {
  RunOptions o = base;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const auto& row = *knobs()[k];
    row.set(o, {flag_text(row, values[k])}, row.flag);
  }
  return o;
}

Candidate candidate_of(const RunOptions& o, const std::string& boundary) {
  Candidate c;
  for (const auto* row : knobs())
    c.values.push_back(row->key_name() == "boundary" ? boundary : row->text(o));
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
      s += fmt::format("{}{}={}", s.empty() ? "" : ", ", knobs()[k]->key_name(), c.values[k]);
  return s.empty() ? std::string("start") : s;
}

std::vector<std::string> candidate_flags(const Candidate& c) {
  std::vector<std::string> f;
  for (std::size_t k = 0; k < c.values.size(); ++k)
    f.push_back(knobs()[k]->flag + "=" + flag_text(*knobs()[k], c.values[k]));
  return f;
}

}  // namespace dmuon::apps::advise
