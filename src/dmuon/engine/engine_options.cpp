#include "dmuon/engine/engine_options.hpp"

#include <fmt/format.h>

#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::engine {

const char* method_name(Method m) {
  switch (m) {
    case Method::dmuon: return "dmuon";
    case Method::fsdp_adamw: return "fsdp-adamw";
    case Method::fsdp_muon: return "fsdp-muon";
    case Method::ddp_muon: return "ddp-muon";
  }
  return "?";
}

Method parse_method(std::string_view s) {
  for (Method m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon})
    if (s == method_name(m)) return m;
  throw InputError(
      fmt::format("unknown method '{}' (valid: dmuon, fsdp-adamw, fsdp-muon, ddp-muon)", s));
}

std::vector<Method> parse_method_list(const std::vector<std::string>& args) {
  std::vector<Method> out;
  for (const auto& word : split_comma_lists(args)) out.push_back(parse_method(word));
  if (out.empty())
    throw InputError("--method names no method (valid: dmuon, fsdp-adamw, fsdp-muon, ddp-muon)");
  return out;
}

const char* compute_name(Compute c) {
  return c == Compute::gemm ? "gemm" : "none";
}

Compute parse_compute(std::string_view s) {
  if (s == "gemm") return Compute::gemm;
  if (s == "none") return Compute::none;
  throw InputError(fmt::format("unknown compute mode '{}' (valid: gemm, none)", s));
}

void validate(const EngineOptions& o, int world_size) {
  if (world_size < 1) throw InputError(fmt::format("world size {} is invalid", world_size));
  if (o.steps < 1) throw InputError(fmt::format("--steps {} is invalid (must be >= 1)", o.steps));
  if (o.warmup < 0)
    throw InputError(fmt::format("--warmup {} is invalid (must be >= 0)", o.warmup));
  if (o.tokens < 1)
    throw InputError(fmt::format("--tokens {} is invalid (must be >= 1)", o.tokens));
  if (o.global_tokens < 0)
    throw InputError(fmt::format("--global-tokens {} is invalid (must be >= 1)", o.global_tokens));
  if (o.tokens > (std::int64_t{1} << 24) || o.global_tokens > (std::int64_t{1} << 28))
    throw InputError("--tokens/--global-tokens too large (max 2^24 per rank, 2^28 global)");
  if (o.inject_nan_step < -1 || o.inject_nan_step == 0 || o.inject_nan_step > o.total_steps())
    throw InputError(fmt::format("--inject-nan-step {} is invalid (valid: 1..{} = warmup + steps)",
                                 o.inject_nan_step, o.total_steps()));
  if (o.prefetch < 0 || o.prefetch > 64)
    throw InputError(
        fmt::format("--prefetch {} is invalid (valid: 0..64 groups ahead)", o.prefetch));
  if (!(o.check_tolerance > 0)) throw InputError("check tolerance must be > 0");
}

}  // namespace dmuon::engine
