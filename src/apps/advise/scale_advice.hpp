#pragma once
// Scale-aware boundary advice for dmuon_inspect and dmuon_project: the degradation detector's
// suggested boundary projected against the current one at the user's scale (--machine M
// --world-size N), so the finding states the trade-off with the figure, and a suggestion the
// projection puts slower is not offered as an improvement. Without a machine the suggestion is
// marked as holding where compute dominates (finer sites overlap more communication but send more,
// smaller messages).

#include <string>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::advise {

struct ScaleAdvice {
  bool projected = false;  ///< a machine was given and both boundaries were projected
  bool slower = false;     ///< the suggestion projects slower (or does not fit) at this scale
  std::string line;        ///< "# ..." lines saying what was projected and what it gives
};

/// The advice on `p`'s suggested boundary at `world` ranks ("" line when there is none).
ScaleAdvice scale_advice(const model::Topology& topo, const RunOptions& o, const plan::Plan& p,
                         int world);

}  // namespace dmuon::apps::advise
