#pragma once
// A modelled machine for the projection (dmuon_project): what one rank's device computes per
// second and what its links carry, read from a YAML machine file (configs/machines/*.yaml,
// every parameter with its public source) or written by `dmuon_project --calibrate`.
//
// Ranks are placed in order: rank r sits on node r / ranks_per_node and in NVLink domain
// r / nvlink_domain (a node on DGX/HGX systems; a whole rack on GB200 NVL72). A communicator
// whose ranks all share one domain uses the `intra` link, else the `inter` link (the NIC).
//
// Files are validated completely: an unknown key, a missing or non-positive value is an
// InputError naming the file, the line and what is valid (exit 2 in the apps).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"
#include "kernels/dtype.hpp"

namespace dmuon::project {

/// What the engine's device semantics are on this machine: GPU (the CUDA backend: streams,
/// Newton–Schulz in --ns-dtype with tiled symmetric products) or CPU (the host backend:
/// fp32 Newton–Schulz with BLAS SYRK).
enum class DeviceKind { gpu, cpu };
const char* device_kind_name(DeviceKind d);

struct ComputeSpec {
  /// Dense peak GEMM rate per dtype, TFLOP/s (index: kernels::Dtype f32, bf16, f16).
  std::array<double, 3> peak_tflops{};
  /// Fraction of the peak a large, well-shaped GEMM reaches (cuBLAS / OpenBLAS measured).
  double gemm_efficiency = 1.0;
  /// Dense fp8 (e4m3/e5m2) tensor-core peak, TFLOP/s (`peak_tflops.fp8`; 0 = the GPU has no
  /// fp8: --compute-dtype fp8 is refused), and the fraction of it a large cuBLASLt fp8 GEMM
  /// reaches (`fp8_gemm_efficiency`; default gemm_efficiency).
  double fp8_peak_tflops = 0;
  double fp8_gemm_efficiency = 1.0;
  /// Thin GEMMs: the smallest of m, n, k at which the rate is half the large-GEMM rate
  /// (efficiency d / (d + half_dim) for smallest dimension d); 0 = no such term.
  double gemm_half_dim = 0;
  /// Streaming multiprocessors (GPU) for wave quantization; 0 = none (CPU).
  int sm_count = 0;
  /// Output tile of one thread block (wave quantization): tiles = ceil(m/tm)·ceil(n/tn).
  int tile_m = 128, tile_n = 128;
  /// Device memory bandwidth, GB/s, and the fraction a streaming kernel reaches.
  double memory_bandwidth_gbps = 0;
  double memory_efficiency = 1.0;
  /// Fixed cost of one kernel on a busy stream (launch gap, tail), µs.
  double kernel_overhead_us = 0;
  /// Step work (docs/STEP-WORK.md): a fused attention kernel's rate as a fraction of the dense
  /// peak, as public FlashAttention benchmarks of the GPU report it (causal FLOPs halved, the
  /// backward counted as 2.5x the forward's FLOPs); 0 = not given (`attention_efficiency`).
  double attention_forward_efficiency = 0, attention_backward_efficiency = 0;
  /// Other fused attention kernels a run can name (--attention-kernel NAME; key
  /// `attention_kernels: {NAME: {forward, backward}}`), in the same units; `attention_efficiency`
  /// is the machine's default kernel (kDefaultAttentionKernel).
  std::map<std::string, std::pair<double, double>> attention_kernels;
  /// Fraction of memory_bandwidth the step's memory-bound kernels (norms, activations,
  /// residuals) stream at (`memory_bound_efficiency`; default: memory_efficiency).
  double memory_bound_efficiency = 1.0;
  /// Host-side launch of one kernel (framework dispatch + the CUDA launch), µs: a kernel takes
  /// at least this long when launched back to back (`launch_us`; default 0).
  double launch_us = 0;
  /// Synthetic input draw (the engine's counter-based RNG), elements/s per rank; 0 = bound
  /// by memory bandwidth like any elementwise write (the GPU kernel is).
  double synthetic_elements_per_s = 0;
  /// CPU cores the ranks of one node share (calibrated CPUs: the union of the ranks' affinity
  /// masks); 0 = every rank has its own device (GPUs, and files without the key). With more
  /// ranks on a node than cores, the rates above are those of one rank alone on a core and
  /// every compute kernel takes compute_share() times as long (compute_cost.hpp).
  int cores = 0;

  double peak_flops(kernels::Dtype t) const {
    return peak_tflops[static_cast<std::size_t>(t)] * 1e12;
  }
};

struct LinkSpec {
  /// Bus bandwidth per rank (nccl-tests convention: algorithm bandwidth times the
  /// collective's busbw factor), GB/s.
  double busbw_gbps = 0;
  /// SMs one running NCCL collective kernel on this link holds (one CTA per channel, each
  /// resident for the whole collective; key `collective_sms`, GPU only): while it runs, the
  /// rank's compute kernels get the other SMs (docs/PROJECTION.md "Compute under
  /// communication"). 0 = not modelled.
  int collective_sms = 0;
};

/// A collective measured on the machine itself (calibration): latency and bus bandwidth at
/// `ranks` participants, used instead of the NCCL model for that kind.
struct MeasuredCollective {
  double latency_us = 0;
  double busbw_gbps = 0;
};

struct MeasuredNetwork {
  int ranks = 0;  ///< participants of the measurement
  std::array<std::optional<MeasuredCollective>, comm::kCollectiveKindCount> kinds{};
};

struct Machine {
  std::string name;
  std::string description;
  DeviceKind device = DeviceKind::gpu;
  int ranks_per_node = 1;
  int nvlink_domain = 1;  ///< ranks that reach each other over the intra link
  /// Device memory per rank (GPU HBM), GB = 1e9 bytes (key memory_GB); 0 = not given (CPU
  /// and calibrated machines): no capacity check (memory_model.hpp, docs/MEMORY.md).
  double memory_gb = 0;
  ComputeSpec compute;
  LinkSpec intra, inter;
  MeasuredNetwork measured;
  /// Where it came from (a path, or "calibrated") and the text as read (comments kept), so a
  /// results file can embed the exact model it was projected with.
  std::string source;
  std::string text;

  /// NVLink domain of world rank r.
  int domain_of(int rank) const { return rank / nvlink_domain; }
};

/// How many times longer a compute kernel takes when `ranks` ranks of one node compute at once
/// on the machine's cores (processor sharing): max(1, ranks / cores), 1 when cores is 0.
/// ranks = min(world, ranks_per_node): the ranks of the projected world on one node.
double compute_share(const Machine& m, int world);

/// Parses a machine file's text; `source` names it in errors ("configs/machines/a800.yaml").
Machine parse_machine(const std::string& text, const std::string& source);

/// Reads a machine file from a path.
Machine read_machine_file(const std::string& path);

/// The machine names of `machines_dir` (its *.yaml files), sorted; none when it is unreadable.
std::vector<std::string> machine_names(const std::string& machines_dir);

/// `spec` is a path to a YAML file (contains '/' or ends in .yaml/.yml) or a name looked up as
/// `<machines_dir>/<name>.yaml`; an unknown name lists the available ones.
Machine load_machine(const std::string& spec, const std::string& machines_dir);

/// The name --attention-kernel gives the machine's own `attention_efficiency`.
inline constexpr const char* kDefaultAttentionKernel = "default";

/// `m` with its attention costed at kernel `name`'s rates (kDefaultAttentionKernel: as it is);
/// InputError naming the kernels the machine lists otherwise.
Machine with_attention_kernel(Machine m, const std::string& name);

/// YAML text of a machine (what --calibrate writes); parse_machine(to_yaml(m)) == m up to
/// rounding in the last printed digit. `comment` lines are written first, each prefixed '# '.
std::string to_yaml(const Machine& m, const std::string& comment = "");

/// The machine's dense peak in `dtype`, FLOP/s (what MFU divides by); InputError naming the
/// machine and the dtype when its file gives none: never a silent fallback.
double peak_flops(const Machine& machine, kernels::Dtype dtype);
/// The machine's dense fp8 peak, FLOP/s; InputError naming the machine when it has none.
double fp8_peak_flops(const Machine& machine);

}  // namespace dmuon::project
