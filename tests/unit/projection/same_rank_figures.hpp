#pragma once
// Two projections of one run agree rank by rank: every rank's phases to a relative tolerance
// (they may add up in another order), its collective calls and bytes exactly, and the peak
// rank's memory term by term.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dmuon/project/projection.hpp"

namespace dmuon::project::testing {

inline ::testing::AssertionResult same_rank_figures(const Projection& a, const Projection& b,
                                                    double rel_tol) {
  const auto& pa = a.result.rank_phases_ms;
  const auto& pb = b.result.rank_phases_ms;
  if (pa.size() != pb.size())
    return ::testing::AssertionFailure() << pa.size() << " against " << pb.size() << " phases";
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (std::abs(pa[i] - pb[i]) > rel_tol * std::max(1.0, std::abs(pa[i])))
      return ::testing::AssertionFailure()
             << "rank/phase " << i << ": " << pa[i] << " ms against " << pb[i] << " ms";
  if (a.result.rank_calls != b.result.rank_calls)
    return ::testing::AssertionFailure() << "per-rank collective calls differ";
  if (a.result.rank_bytes != b.result.rank_bytes)
    return ::testing::AssertionFailure() << "per-rank collective bytes differ";
  // The memory of the peak rank, term by term (a reduced layout keeps every arena's size).
  if (a.memory.terms() != b.memory.terms())
    return ::testing::AssertionFailure() << "the peak rank's memory terms differ";
  return ::testing::AssertionSuccess();
}

}  // namespace dmuon::project::testing
