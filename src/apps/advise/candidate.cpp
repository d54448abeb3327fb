#include "advise/candidate.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace dmuon::apps::advise {

const char* knob_name(Knob k) {
  switch (k) {
    case Knob::boundary: return "boundary";
    case Knob::replicate: return "replicate";
    case Knob::reshard: return "reshard";
    case Knob::prefetch: return "prefetch";
    case Knob::comm_dtype: return "comm_dtype";
    case Knob::owner_strategy: return "owner_strategy";
    case Knob::cost_model: return "cost_model";
    case Knob::pack_threshold: return "pack_threshold";
    case Knob::ac: return "ac";
  }
  return "?";
}

std::string Candidate::value(Knob k) const {
  switch (k) {
    case Knob::boundary: return boundary;
    case Knob::replicate: return std::to_string(replicate);
    case Knob::reshard: return reshard;
    case Knob::prefetch: return std::to_string(prefetch);
    case Knob::comm_dtype: return comm_dtype;
    case Knob::owner_strategy: return owner_strategy;
    case Knob::cost_model: return cost_model;
    case Knob::pack_threshold:
      return pack_threshold == 0 ? std::string("no-pack") : std::to_string(pack_threshold);
    case Knob::ac: return ac;
  }
  return "?";
}

Candidate Candidate::with(Knob k, const std::string& text) const {
  Candidate c = *this;
  switch (k) {
    case Knob::boundary: c.boundary = text; break;
    case Knob::replicate: c.replicate = std::stoi(text); break;
    case Knob::reshard: c.reshard = text; break;
    case Knob::prefetch: c.prefetch = std::stoi(text); break;
    case Knob::comm_dtype: c.comm_dtype = text; break;
    case Knob::owner_strategy: c.owner_strategy = text; break;
    case Knob::cost_model: c.cost_model = text; break;
    case Knob::pack_threshold: c.pack_threshold = text == "no-pack" ? 0 : std::stoll(text); break;
    case Knob::ac: c.ac = text; break;
  }
  return c;
}

std::string Candidate::key() const {
  std::string s;
  for (int k = 0; k < kKnobCount; ++k)
    s += fmt::format("{}={};", knob_name(static_cast<Knob>(k)), value(static_cast<Knob>(k)));
  return s;
}

std::string describe_changes(const Candidate& c, const Candidate& start) {
  std::string s;
  for (int i = 0; i < kKnobCount; ++i) {
    const auto k = static_cast<Knob>(i);
    if (c.value(k) == start.value(k)) continue;
    if (!s.empty()) s += ", ";
    // Short forms for the table: "R=4", "z2", "bf16"; the others as knob=value.
    if (k == Knob::replicate)
      s += "R=" + c.value(k);
    else if (k == Knob::reshard || k == Knob::comm_dtype)
      s += c.value(k);
    else
      s += fmt::format("{}={}", knob_name(k), c.value(k));
  }
  return s.empty() ? std::string("start") : s;
}

std::vector<std::string> candidate_flags(const Candidate& c) {
  std::vector<std::string> f = {"--boundary",
                                "strict:" + c.boundary,
                                "--owner-strategy",
                                c.owner_strategy,
                                "--cost-model",
                                c.cost_model,
                                "--replicate",
                                std::to_string(c.replicate),
                                "--reshard",
                                c.reshard,
                                "--prefetch",
                                std::to_string(c.prefetch),
                                "--comm-dtype",
                                c.comm_dtype,
                                "--ac",
                                c.ac};
  if (c.pack_threshold == 0) {
    f.push_back("--no-pack");
  } else {
    f.push_back("--pack-threshold");
    f.push_back(std::to_string(c.pack_threshold));
  }
  return f;
}

}  // namespace dmuon::apps::advise
