#pragma once
// The machine probe of a timing comparison. dmuon_bench measures an sgemm on every rank at once
// when it starts (provenance sgemm_gflops: 512^3, median of 5 calls, median over ranks): a
// snapshot of the compute rate the run's ranks get from the machine at that moment. On a shared
// machine that rate moves by tens of percent between invocations, and the step times move
// with it, so when the two sides' probes disagree a timing change may be the machine's, not
// the code's.
//
// The probes disagree when B's rate differs from A's by more than the threshold
// max(tolerance, kProbeNoise) in either direction (ratio outside [1/(1+t), 1+t]):
//  * the tolerance, because the gate calls a change beyond it a regression, and a machine that
//    computes that much slower on one side can make such a change by itself;
//  * kProbeNoise, the probe's own run-to-run noise, so that a tiny --time-tolerance does not
//    make every comparison unreliable through the probe's jitter alone.
// Then every timing verdict (slower, faster or same) is "unreliable": reported with what the
// samples said, neither a regression nor an improvement. Both directions, because the probe
// is a snapshot of the start: it shows that the machine's state changed, not which side the
// change favoured while the steps ran. (Measured: 8 back-to-back invocations of the README's
// 8-rank command on the shared 2-core VM probed 6.3-32.6 GFLOP/s with step medians of
// 82-268 ms, and the one probing 8.3 had among the fastest steps.) Probes that agree do not
// prove the machine steady either; the invocation rule of compare.hpp covers that.

#include <string>
#include <vector>

namespace dmuon::results {

/// Two probes of an unchanged machine differ by less than this: 12 successive probes in one
/// process (1 rank, 2-core VM) spanned 98.0-106.1 GFLOP/s, +-4 % around their median.
inline constexpr double kProbeNoise = 0.10;

struct ProbeAgreement {
  double a_gflops = 0, b_gflops = 0;  ///< per side: median over its files' probes; 0 = none
  double threshold = 0;               ///< t: the probes disagree outside [1/(1+t), 1+t]
  bool measured() const { return a_gflops > 0 && b_gflops > 0; }
  double ratio() const;  ///< b / a; NaN unless measured()
  bool disagree() const;
  /// B's probe was the slower (only meaningful when they disagree).
  bool b_busier() const { return ratio() < 1; }
};

/// The agreement of two sides' probes (one rate per results file; rates <= 0 are files without
/// a probe and are ignored) at the gate's tolerance.
ProbeAgreement probe_agreement(const std::vector<double>& a_gflops,
                               const std::vector<double>& b_gflops, double tolerance);

/// The verdict that stands given the probes: "unreliable" for a timing verdict ("slower",
/// "faster", "same") when they disagree, else `verdict`. Other verdicts ("untested",
/// "non-finite") are not about the machine and stand.
std::string verdict_given_probes(const std::string& verdict, const ProbeAgreement& p);

/// One line with both rates, the ratio and the threshold, e.g. "sgemm probe at start A 24.9,
/// B 16.2 GFLOP/s per rank, B/A 0.65 outside [0.83, 1.20] (B busier)".
std::string describe(const ProbeAgreement& p);

}  // namespace dmuon::results
