#include "dmuon/config/config_keys.hpp"

namespace dmuon::config {

std::string ConfigKey::flag() const {
  std::string f = "--" + name;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

const std::vector<ConfigKey>& bench_config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"topology", KeyKind::scalar, "built-in topology name"},
      {"preset", KeyKind::scalar, "preset of the topology"},
      {"set", KeyKind::list, "KEY=VALUE overrides of preset dimensions"},
      {"topology_file", KeyKind::scalar, "JSON topology file (instead of topology)"},
      {"list", KeyKind::flag, "list the built-in topologies and exit"},
      {"dedicate", KeyKind::scalar, "dedication rule"},
      {"route", KeyKind::list, "parameter routes RULE=muon|adamw|fsdp (first match wins)"},
      {"boundary", KeyKind::list,
       "hook boundary, or a list of them to sweep (default | recommended | incomplete | "
       "types:... | paths:... | resolver:...; an item may be {spec: S, strict: B})"},
      {"lenient", KeyKind::flag, "lenient boundary for items without their own strict"},
      {"owner_strategy", KeyKind::list,
       "lpt | round_robin | rank0 | lpt_refine, or a list of them (dmuon runs once per strategy)"},
      {"cost_model", KeyKind::scalar, "optimizer | numel"},
      {"no_pack", KeyKind::flag, "every parameter its own partition unit"},
      {"pack_threshold", KeyKind::scalar, "numel below which parameters are packed"},
      {"max_owners_per_group", KeyKind::scalar, "owners of one layer key (0 = unlimited)"},
      {"group_key", KeyKind::scalar, "layer | site: what buckets the partition's units"},
      {"no_column_balance", KeyKind::flag, "HSDP: no per-column balance"},
      {"replicate", KeyKind::scalar, "replicate-group size R"},
      {"tp", KeyKind::scalar, "tensor-parallel group size T (dmuon_inspect; bench: 1)"},
      {"tp_shard", KeyKind::scalar, "rule picking the TP-sharded dedicated parameters"},
      {"tp_row", KeyKind::scalar, "rule picking the row-parallel TP-sharded parameters"},
      {"method", KeyKind::list,
       "methods to run (dmuon, fsdp-adamw, fsdp-muon, ddp-muon, ddp-dmuon)"},
      {"reshard", KeyKind::scalar, "z3 | z2"},
      {"grad_reduce", KeyKind::scalar, "per-param | packed (dmuon gradient reduces)"},
      {"prefetch", KeyKind::scalar, "weight collectives in flight ahead of compute (groups)"},
      {"device", KeyKind::scalar, "host | cuda"},
      {"comm_dtype", KeyKind::scalar, "fp32 | bf16 (parameters and gradients on the wire)"},
      {"reduce_dtype", KeyKind::scalar, "fp32 | bf16 (gradients on the wire; default comm_dtype)"},
      {"ns", KeyKind::scalar, "gram | direct (Newton-Schulz form)"},
      {"ns_dtype", KeyKind::scalar, "fp16 | bf16 | fp32 (device Newton-Schulz iterations)"},
      {"optimizer_pipeline", KeyKind::scalar, "per-group | all-then-publish"},
      {"compute", KeyKind::scalar, "gemm (synthetic per-Linear GEMMs) | none"},
      {"clip_norm", KeyKind::scalar, "global gradient-norm clipping threshold (> 0)"},
      {"clip_norm_type", KeyKind::scalar, "2 | inf (the norm clip_norm bounds)"},
      {"accum", KeyKind::scalar, "micro-batches per step (gradient accumulation)"},
      {"seq_len", KeyKind::scalar, "tokens per sample (with micro_batch; activation work)"},
      {"micro_batch", KeyKind::scalar, "samples per rank (with seq_len)"},
      {"ac", KeyKind::scalar, "none | selective | selective-layer | full | core-attn"},
      {"compute_dtype", KeyKind::scalar, "bf16 | fp16 | fp32 (activations and GEMMs)"},
      {"flops", KeyKind::scalar, "6n | 6n-attn | megatron | megatron-causal (MFU convention)"},
      {"fusion", KeyKind::scalar, "fused | eager (the activation work's elementwise kernels)"},
      {"tokens", KeyKind::scalar, "samples per rank per step"},
      {"global_tokens", KeyKind::scalar, "global batch in samples (overrides tokens)"},
      {"steps", KeyKind::scalar, "timed steps"},
      {"warmup", KeyKind::scalar, "untimed warm-up steps (per repeat)"},
      {"repeats", KeyKind::scalar, "engine runs per row; samples = repeats x steps"},
      {"seed", KeyKind::scalar, "random seed"},
      {"check", KeyKind::flag, "verify against the single-process reference"},
      {"check_tolerance", KeyKind::scalar, "max relative error accepted by check"},
      {"json", KeyKind::flag, "print one JSON object instead of the table"},
      {"wide", KeyKind::flag, "table: long specs and errors in full (not fitted to 160 columns)"},
      {"inject_nan_step", KeyKind::scalar, "test aid: poison a gradient at this step"},
      {"output", KeyKind::scalar, "results file (HDF5); none when absent"},
      {"trace", KeyKind::scalar, "timeline as Chrome trace-event JSON; none when absent"},
  };
  return keys;
}

std::string key_names(const std::vector<ConfigKey>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k.name;
  return s;
}

}  // namespace dmuon::config
