#include "dmuon/engine/step/grad_clip.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon::engine {

double parse_clip_norm(std::string_view text) {
  const std::string s(text);
  const auto bad = [&] {
    return InputError(fmt::format("--clip-norm '{}' is invalid (must be a finite number > 0)", s));
  };
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) throw bad();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) || !(v > 0)) throw bad();
  return v;
}

ClipNormType parse_clip_norm_type(std::string_view text) {
  if (text == "2") return ClipNormType::two;
  if (text == "inf") return ClipNormType::inf;
  throw InputError(fmt::format("--clip-norm-type '{}' is invalid (valid: 2, inf)", text));
}

const char* clip_norm_type_name(ClipNormType t) {
  return t == ClipNormType::two ? "2" : "inf";
}

std::string clip_label(const EngineOptions& o) {
  if (!(o.step.clip_norm > 0)) return "none";
  return fmt::format("{}:{}", o.step.clip_norm, clip_norm_type_name(o.step.clip_norm_type));
}

ClipSpan clip_counted(const StepLayout& L, const ParamLayout& p) {
  // --tp: every TP index holds the parameters that are not TP-sharded whole (grad_clip.hpp).
  if (L.tp() > 1 && !p.tp_sharded() && L.tp_rank() != 0) return {};
  const bool expert_group = L.in_expert_group(p);
  switch (p.storage) {
    case Storage::owned: return {0, p.numel};
    // The member's own length: the projection reuses one layout for ranks of several columns.
    case Storage::sharded:
      return L.me.row() == 0 ? ClipSpan{0, p.shard_len_at(L.shard_member(p))} : ClipSpan{};
    case Storage::replicated: {
      // ddp-dmuon: an owner-based parameter's gradient is reduced to its owner only.
      if (p.owner >= 0) return p.owner == L.me.dp() ? ClipSpan{0, p.numel} : ClipSpan{};
      const std::int64_t w = expert_group ? L.me.grid.expert_replicas() : L.me.grid.dp_size(),
                         r = expert_group ? L.me.expert_replica() : L.me.dp();
      const std::int64_t begin = p.numel * r / w, end = p.numel * (r + 1) / w;
      return {begin, end - begin};
    }
    // --ep: this rank's experts, whole (each row holds the same: row 0's count).
    case Storage::expert: return L.me.row() == 0 ? ClipSpan{0, p.numel} : ClipSpan{};
    case Storage::column:
    case Storage::remote: return {};
  }
  return {};
}

void clip_in_place(const EngineOptions& o, const std::vector<GradSpan>& grads) {
  double partial = 0;
  for (const auto& g : grads) clip_accumulate(o.step.clip_norm_type, g.g, g.n, partial);
  const float coef = clip_coefficient(
      o.step.clip_norm,
      clip_total_norm(o.step.clip_norm_type, static_cast<double>(static_cast<float>(partial))));
  if (coef == 1.0f) return;
  for (const auto& g : grads)
    for (std::int64_t i = 0; i < g.n; ++i) g.g[i] *= coef;
}

void clip_accumulate(ClipNormType type, const float* g, std::int64_t n, double& partial) {
  if (type == ClipNormType::two) {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
    partial += s;
    return;
  }
  double m = partial;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(g[i]));
    // NaN propagates (as torch's max does): the step then aborts on the non-finite gradient.
    if (std::isnan(a) || a > m) m = a;
  }
  partial = m;
}

double clip_total_norm(ClipNormType type, double reduced) {
  return type == ClipNormType::two ? std::sqrt(reduced) : reduced;
}

float clip_coefficient(double max_norm, double total) {
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(total) + 1e-6f);
  return std::min(coef, 1.0f);
}

}  // namespace dmuon::engine
