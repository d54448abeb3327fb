#pragma once
// Machine files for the projection tests, written so every expected time can be computed by
// hand: no kernel overhead, unit efficiencies, round rates.

#include <string>

#include "dmuon/project/machine_model.hpp"

namespace dmuon::project::testing {

/// A machine of `ranks` ranks on one node (a GPU one: communication overlaps compute; "cpu":
/// it does not), collectives measured at `ranks` ranks:
/// broadcast / reduce / all-gather / reduce-scatter with `latency_us` and `busbw` GB/s,
/// all-reduce with twice the latency (two traversals) and the same bus bandwidth; compute
/// 1 TFLOP/s fp32, memory `memory_gbps` GB/s (100 unless told), no overheads.
/// `sms` > 0: the GPU has that many SMs, and each collective kernel holds `collective_sms` of
/// them while it runs (compute_contention.hpp).
inline Machine measured_machine(int ranks, double latency_us, double busbw,
                                const std::string& device = "gpu", double memory_gbps = 100,
                                int sms = 0, int collective_sms = 0) {
  const std::string l = std::to_string(latency_us), b = std::to_string(busbw),
                    l2 = std::to_string(2 * latency_us), n = std::to_string(ranks);
  std::string y;
  y += "name: hand\n";
  y += "device: " + device + "\n";
  y += "ranks_per_node: " + n + "\n";
  y += "nvlink_domain: " + n + "\n";
  y += "compute:\n";
  y += "  peak_tflops: {fp32: 1, bf16: 1, fp16: 1}\n";
  y += "  gemm_efficiency: 1\n";
  y += "  memory_bandwidth_GBps: " + std::to_string(memory_gbps) + "\n";
  if (sms > 0) y += "  sm_count: " + std::to_string(sms) + "\n";
  y += "network:\n";
  y += "  intra: {busbw_GBps: " + b;
  if (collective_sms > 0) y += ", collective_sms: " + std::to_string(collective_sms);
  y += "}\n";
  y += "  measured:\n";
  y += "    ranks: " + n + "\n";
  for (const char* kind : {"broadcast", "reduce", "all_gather", "reduce_scatter"})
    y += std::string("    ") + kind + ": {latency_us: " + l + ", busbw_GBps: " + b + "}\n";
  y += "    all_reduce: {latency_us: " + l2 + ", busbw_GBps: " + b + "}\n";
  return parse_machine(y, "test machine");
}

/// The same with two-level links for the NCCL model: `per_domain` ranks per NVLink domain;
/// `sms` > 0: with that many SMs, of which a collective kernel holds `intra_sms` / `inter_sms`.
inline Machine nccl_machine(int per_domain, double intra, double inter, int sms = 0,
                            int intra_sms = 0, int inter_sms = 0) {
  auto held = [](int n) { return n > 0 ? ", collective_sms: " + std::to_string(n) : ""; };
  return parse_machine(
      "name: nccl-hand\n"
      "device: gpu\n"
      "ranks_per_node: " +
          std::to_string(per_domain) +
          "\n"
          "nvlink_domain: " +
          std::to_string(per_domain) +
          "\n"
          "compute:\n"
          "  peak_tflops: {fp32: 1, bf16: 8, fp16: 8}\n"
          "  gemm_efficiency: 1\n"
          "  memory_bandwidth_GBps: 100\n" +
          (sms > 0 ? "  sm_count: " + std::to_string(sms) + "\n" : std::string()) +
          "network:\n"
          "  intra: {busbw_GBps: " +
          std::to_string(intra) + held(intra_sms) +
          "}\n"
          "  inter: {busbw_GBps: " +
          std::to_string(inter) + held(inter_sms) + "}\n",
      "test machine");
}

}  // namespace dmuon::project::testing
