#pragma once
// Agreeing that every rank resolved the same run. An MPMD launch, or nodes holding different
// versions of a config or topology file, can give ranks different step counts, methods or
// models; their collectives then no longer match, and the job hangs or dies inside MPI. After
// set-up (setup_agreement.hpp) every rank describes what it resolved as "key = value" lines,
// and agree_on_run() compares them in a fixed handful of collectives that every rank reaches
// whatever it resolved: a hash first, rank 0's lines only when the hashes differ.
//
// A description holds what decides a rank's collectives and results: the resolved options, the
// module tree, the rows and their plans. It leaves out what may differ by design: the rank, the
// host, and what only rank 0 uses (output and trace paths, the table's format).

#include <mpi.h>

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmuon/model/topology.hpp"

namespace dmuon::apps {

/// One rank's resolved run, as ordered "key = value" lines (keys and values are kept on one
/// line each: control characters and backslashes are escaped).
class RunDescription {
 public:
  void add(std::string_view key, std::string_view value);
  template <typename T>
  void add(std::string_view key, const T& value) {
    add(key, std::string_view(fmt::format("{}", value)));
  }

  const std::vector<std::pair<std::string, std::string>>& lines() const { return lines_; }
  /// The lines as one string ("key\x1fvalue\n" each), the form that is hashed and sent.
  std::string text() const;
  /// Inverse of text().
  static RunDescription from_text(std::string_view text);

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

/// Adds the topology's lines: name, preset and dimensions, the module tree (module paths and
/// types; parameter names, shapes, dtypes and every name a parameter holds, so ties and
/// aliases count) and the geometry. Counts come first, so a file with one more parameter is
/// reported as such rather than as the first shifted line.
void describe_topology(const model::Topology& topo, RunDescription& d);

/// The first line at which `mine` differs from `theirs` (rank `their_rank`'s), worded for an
/// error: "steps = 3 (rank 0: 2)"; a line missing on one side reads "(none)". "" when equal.
std::string first_difference(const RunDescription& mine, const RunDescription& theirs,
                             int their_rank);

/// Collective over `comm`: returns when every rank passed an equal description; otherwise every
/// rank throws InputError "rank R resolved a different run than rank 0: <first difference>"
/// for the lowest rank R that differs from rank 0. At most six collectives, the same on every
/// rank.
void agree_on_run(MPI_Comm comm, const RunDescription& mine);

}  // namespace dmuon::apps
