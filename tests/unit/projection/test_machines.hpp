#pragma once
// Machine files for the projection tests, written so every expected time can be computed by
// hand: no kernel overhead, unit efficiencies, round rates.

#include <string>

#include "dmuon/project/machine_model.hpp"

namespace dmuon::project::testing {

/// A CPU machine of `ranks` ranks on one node, collectives measured at `ranks` ranks:
/// broadcast / reduce / all-gather / reduce-scatter with `latency_us` and `busbw` GB/s,
/// all-reduce with twice the latency (two traversals) and the same bus bandwidth; compute
/// 1 TFLOP/s fp32, memory 100 GB/s, no overheads.
inline Machine measured_machine(int ranks, double latency_us, double busbw) {
  const std::string l = std::to_string(latency_us), b = std::to_string(busbw),
                    l2 = std::to_string(2 * latency_us);
  return parse_machine(
      "name: hand\n"
      "device: cpu\n"
      "ranks_per_node: " +
          std::to_string(ranks) +
          "\n"
          "nvlink_domain: " +
          std::to_string(ranks) +
          "\n"
          "compute:\n"
          "  peak_tflops: {fp32: 1}\n"
          "  gemm_efficiency: 1\n"
          "  memory_bandwidth_GBps: 100\n"
          "network:\n"
          "  intra: {busbw_GBps: " +
          b +
          "}\n"
          "  measured:\n"
          "    ranks: " +
          std::to_string(ranks) +
          "\n"
          "    broadcast: {latency_us: " +
          l + ", busbw_GBps: " + b +
          "}\n"
          "    reduce: {latency_us: " +
          l + ", busbw_GBps: " + b +
          "}\n"
          "    all_gather: {latency_us: " +
          l + ", busbw_GBps: " + b +
          "}\n"
          "    reduce_scatter: {latency_us: " +
          l + ", busbw_GBps: " + b +
          "}\n"
          "    all_reduce: {latency_us: " +
          l2 + ", busbw_GBps: " + b + "}\n",
      "test machine");
}

/// The same with two-level links for the NCCL model: `per_domain` ranks per NVLink domain.
inline Machine nccl_machine(int per_domain, double intra, double inter) {
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
          "  memory_bandwidth_GBps: 100\n"
          "network:\n"
          "  intra: {busbw_GBps: " +
          std::to_string(intra) +
          "}\n"
          "  inter: {busbw_GBps: " +
          std::to_string(inter) + "}\n",
      "test machine");
}

}  // namespace dmuon::project::testing
