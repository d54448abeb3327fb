#include "device_cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/engine/step/grad_clip.hpp"
#include "dmuon/engine/step/synthetic.hpp"
#include "dmuon/work/step_work.hpp"
#include "test_plan_options.hpp"

namespace dmuon::device_check {

namespace {

using engine::ClipNormType;
using engine::Method;
using kernels::Dtype;

// Every method on every topology: fp32 throughout (the data movement and indexing, held to
// 1e-4 like the host), Newton–Schulz in --ns-dtype, and for dmuon and fsdp-adamw a bf16 wire.
void add_methods(std::vector<Case>& out) {
  for (const char* t : {"moe", "vla", "llm"})
    for (auto m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                   Method::ddp_dmuon}) {
      out.push_back(make_case(t, m, Dtype::f32, true));
      if (m != Method::fsdp_adamw) out.push_back(make_case(t, m, Dtype::f32, false));
      if (m == Method::dmuon || m == Method::fsdp_adamw)
        out.push_back(make_case(t, m, Dtype::bf16, false));
    }
}

// Clipping and accumulation on the GPU, on llm (its references are the smallest: .device
// travels within 64 MiB). The bounds are far below the synthetic gradients' norms, so every
// step clips. fp32 (the reduction order is the only difference) for each method, and with
// --ns-dtype for dmuon.
void add_clip_accum(std::vector<Case>& out) {
  const Dtype f32 = Dtype::f32;
  const ClipNormType two = ClipNormType::two, inf = ClipNormType::inf;
  for (auto m : {Method::dmuon, Method::fsdp_adamw}) {
    out.push_back(make_case("llm", m, f32, true, 0.5, two, 1));
    if (m == Method::dmuon) out.push_back(make_case("llm", m, f32, true, 0.01, inf, 1));
    out.push_back(make_case("llm", m, f32, true, 0, two, 3));
  }
  out.push_back(make_case("llm", Method::dmuon, f32, true, 0.5, two, 3));
  out.push_back(make_case("llm", Method::dmuon, f32, false, 0.5, two, 1));
  out.push_back(make_case("llm", Method::dmuon, f32, false, 0, two, 3));
  out.push_back(make_case("llm", Method::fsdp_muon, f32, true, 0.01, inf, 1));
  out.push_back(make_case("llm", Method::ddp_muon, f32, true, 0, two, 3));
  out.push_back(make_case("llm", Method::ddp_dmuon, f32, true, 0.5, two, 1));
  out.push_back(make_case("llm", Method::ddp_dmuon, f32, true, 0, two, 3));
}

// --route dtypes: the MLP matrices (Muon) on a bf16 wire of their own, for every Muon method
// (owner-based pairs, fsdp-muon's gathers and DDP replicas in the alt arenas); the norms in
// fp32 under a bf16 wire, and on sharded_adamw in bf16; fsdp-adamw's norms in bf16.
void add_routes(std::vector<Case>& out) {
  const Dtype f32 = Dtype::f32, bf16 = Dtype::bf16;
  const std::string mlp = "contains:mlp=muon:bf16";
  for (auto m : {Method::dmuon, Method::fsdp_muon, Method::ddp_muon, Method::ddp_dmuon})
    out.push_back(make_case("llm", m, f32, true, 0, ClipNormType::two, 1, mlp));
  out.push_back(make_case("llm", Method::dmuon, f32, false, 0, ClipNormType::two, 1, mlp));
  out.push_back(make_case("llm", Method::dmuon, bf16, false, 0, ClipNormType::two, 1,
                          "contains:norm=fsdp:fp32"));
  out.push_back(make_case("llm", Method::dmuon, f32, true, 0, ClipNormType::two, 1,
                          "contains:norm=sharded_adamw:bf16"));
  out.push_back(make_case("llm", Method::fsdp_adamw, f32, true, 0, ClipNormType::two, 1,
                          "contains:norm=fsdp:bf16"));
}

// The step's activation work (attention unfused, norms, loss, the recompute of --ac full) on
// the GPU's compute stream next to the parameters' work: the check is that of the plain case.
void add_activation(std::vector<Case>& out) {
  for (auto m : {Method::dmuon, Method::fsdp_adamw}) {
    Case c = make_case("llm", m, Dtype::f32, true);
    c.seq_len = 32;
    out.push_back(c);
  }
}

// Samples enough for full-rank gradients (synthetic.hpp): the 16-bit Newton–Schulz is then
// compared where rounding is not amplified through near-null directions (docs/KERNELS.md).
std::int64_t global_tokens(const Loaded& l) {
  const auto& site_of = l.plan.hooks.site_of_param;
  return std::max<std::int64_t>(64, engine::full_rank_global_tokens(l.topo.tree, [&](int pid) {
                                  return site_of[static_cast<std::size_t>(pid)] >= 0;
                                }));
}

}  // namespace

Case make_case(std::string topology, engine::Method method, kernels::Dtype wire, bool fp32_ns,
               double clip, engine::ClipNormType clip_type, int accum, std::string route) {
  return {std::move(topology), method, wire, fp32_ns, clip, clip_type, accum, std::move(route)};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  add_methods(out);
  add_clip_accum(out);
  add_routes(out);
  add_activation(out);
  return out;
}

Loaded load(const Case& c) {
  test::PlanOptions po;
  po.topology = c.topology;
  if (!c.route.empty()) po.routes = {c.route};
  Loaded l{test::load_topology(po), {}};
  l.plan = plan::make_plan(l.topo.tree, test::make_plan_config(po, l.topo, 1));
  return l;
}

engine::EngineOptions options(const Case& c, const Loaded& l, Dtype ns_dtype, int steps) {
  engine::EngineOptions o;
  o.step.method = c.method;
  o.backend.device = engine::Device::cuda;
  o.step.wire = c.wire;
  o.backend.ns_dtype = c.fp32_ns ? Dtype::f32 : ns_dtype;
  o.step.global_tokens = global_tokens(l);
  o.run.steps = steps;
  o.run.warmup = 1;
  o.run.seed = 7;
  o.run.check = true;
  o.step.clip_norm = c.clip;
  o.step.clip_norm_type = c.clip_type;
  o.step.accum = c.accum;
  if (c.seq_len > 0) {
    work::RunShape shape;
    shape.seq_len = c.seq_len;
    shape.micro_batch = 2;
    shape.dtype = c.wire;
    shape.ac = work::AcPolicy::full;
    o.step.activation = engine::activation_work(work::build_step_work(l.topo, shape));
  }
  return o;
}

std::string variant(const Case& c) {
  std::string v;
  if (c.clip > 0) v += fmt::format("clip{}-{}", c.clip, engine::clip_norm_type_name(c.clip_type));
  if (c.accum > 1) v += fmt::format("{}accum{}", v.empty() ? "" : "-", c.accum);
  return v;
}

std::string label(const Case& c) {
  std::string s = engine::method_name(c.method);
  if (!variant(c).empty()) s += " " + variant(c);
  if (!c.route.empty()) s += " route " + c.route;
  if (c.seq_len > 0) s += fmt::format(" + activation work (seq {}, ac full)", c.seq_len);
  return s;
}

Case reference_case(const Case& c) {
  Case r = c;
  r.method = c.method == Method::fsdp_adamw ? c.method : Method::dmuon;
  r.wire = Dtype::f32;
  r.fp32_ns = true;
  r.seq_len = 0;  // the activation work feeds no gradient
  return r;
}

std::string reference_path(const std::string& dir, const Case& c) {
  const std::string v = variant(c);
  return fmt::format("{}/{}-{}{}{}.ref", dir, c.topology,
                     c.method == Method::fsdp_adamw ? "adamw" : "muon", v.empty() ? "" : "-", v);
}

}  // namespace dmuon::device_check
