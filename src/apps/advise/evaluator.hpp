#pragma once
// Projects one candidate (candidate.hpp) exactly as `dmuon_project` would project the same
// flags: the bench options of the invocation with the candidate's knobs set, the plan for the
// world, the replay on the machine model. Outcomes are cached by candidate and method, so the
// search may ask again for free.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "advise/candidate.hpp"
#include "dmuon/engine/step/engine_options.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/project/machine_model.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::advise {

enum class Status {
  ok,        ///< fits and has a step time
  oom,       ///< peak memory over the cap: no time counts
  rejected,  ///< the plan or the engine refuses it (a strict boundary that misses parameters)
};
const char* status_name(Status s);

struct Outcome {
  Status status = Status::rejected;
  std::string error;  ///< why rejected / oom (one line)
  double step_ms = 0;
  double mfu = 0;
  double tokens_per_s = 0;
  std::int64_t peak_bytes = 0;
  int peak_rank = 0;
  std::string peak_phase;
  std::int64_t excess_bytes = 0;  ///< over the cap (> 0: oom)
  /// The peak rank's activations and recompute: all a larger --cp could take off the peak.
  std::int64_t activation_bytes = 0;
  std::string dominant_phase;  ///< the largest part of the step (compute, NS, exposed comm...)
  double dominant_ms = 0;
  int sites = 0;                   ///< hook sites of the plan
  int idle_ranks = 0;              ///< ranks of a column owning no matrix
  std::string suggested_boundary;  ///< the plan's degradation report suggestion ("" none)
  double wall_s = 0;               ///< what the projection took
};

class Evaluator {
 public:
  /// `base`: the invocation's options (its fixed choices); `capacity_gb`: the memory cap per
  /// rank (0: none). `topo` is the model as a rank holds it at the invocation's --ep
  /// (load_rank_topology), `whole` the whole model whose activation work runs (--ep: not the
  /// same; null: `topo`); a candidate at another --ep is planned on an EP rank's tree made from
  /// `whole` (rejected when `whole` is not given and the invocation's --ep is above 1).
  Evaluator(const RunOptions& base, const model::Topology& topo,
            const dmuon::project::Machine& machine, int world, double capacity_gb,
            const model::Topology* whole = nullptr);

  const Outcome& evaluate(const Candidate& c, engine::Method method = engine::Method::dmuon);
  /// True when evaluate(c, method) would not project anything (already known).
  bool known(const Candidate& c, engine::Method method = engine::Method::dmuon) const;

  /// Hook sites of the candidate's plan (0 when it cannot be planned): what a projection of it
  /// costs grows with them. Plans are cheap next to their projection; sites are cached.
  int plan_sites(const Candidate& c);

  int projections() const { return projections_; }
  double capacity_gb() const { return capacity_gb_; }

 private:
  Outcome project_candidate(const Candidate& c, engine::Method method);
  /// The model as one rank holds it at the candidate's --ep (cached per size).
  const model::Topology& rank_topology(const Candidate& c);
  /// Sites depend on the boundary, the reshard mode and the EP size only.
  static std::string sites_key(const Candidate& c);

  RunOptions base_;
  const model::Topology& topo_;
  const model::Topology& whole_;
  const dmuon::project::Machine& machine_;
  int world_;
  double capacity_gb_;
  std::map<std::string, Outcome> cache_;
  std::map<std::string, int> sites_;
  std::map<int, model::Topology> rank_topos_;
  int projections_ = 0;
};

}  // namespace dmuon::apps::advise
