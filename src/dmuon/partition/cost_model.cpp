#include "dmuon/partition/cost_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon::partition {

const char* cost_model_name(CostModel m) {
  return m == CostModel::optimizer ? "optimizer" : "numel";
}

CostModel parse_cost_model(std::string_view s) {
  if (s == "optimizer") return CostModel::optimizer;
  if (s == "numel") return CostModel::numel;
  throw InputError(fmt::format("unknown cost model '{}' (valid: optimizer, numel)", s));
}

namespace {

std::int64_t shape_numel(std::string_view name, const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(
          fmt::format("parameter '{}' shape [{}]: element count overflows 64 bits (limit: 2^63-1)",
                      name, fmt::join(shape, ", ")));
  return n;
}

}  // namespace

std::int64_t clamped_numel(const std::vector<std::int64_t>& shape) {
  return std::max<std::int64_t>(1, shape_numel("", shape));
}

std::int64_t optimizer_cost(std::string_view name, const std::vector<std::int64_t>& shape) {
  const std::int64_t numel = std::max<std::int64_t>(1, shape_numel(name, shape));
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static constexpr std::string_view kCheap[] = {
      "embed", "embedding", "lm_head", "norm", "layernorm", "ln_", ".ln", "bias", "rope", "rotary"};
  bool cheap = shape.size() < 2;
  for (auto k : kCheap) cheap = cheap || lower.find(k) != std::string::npos;
  if (cheap) return std::max<std::int64_t>(1, numel / 1'000'000);

  const auto too_large = [&] {
    return InputError(
        fmt::format("parameter '{}' shape [{}]: its optimizer cost overflows 64 bits (limit: "
                    "2^63-1; the shape is too "
                    "large; --cost-model numel does not overflow)",
                    name, fmt::join(shape, ", ")));
  };
  // rows * cols = numel fits in int64, so every term below fits in 128 bits; with rows == 0
  // the product of the other dimensions is not bounded by numel and is checked.
  using u128 = unsigned __int128;
  const std::int64_t rows = shape[0];
  std::int64_t cols = 1;
  for (std::size_t i = 1; i < shape.size(); ++i)
    if (__builtin_mul_overflow(cols, shape[i], &cols)) throw too_large();
  const u128 small = static_cast<u128>(std::max<std::int64_t>(1, std::min(rows, cols)));
  const u128 big = static_cast<u128>(std::max(rows, cols));
  const u128 ns = 5 * small * (static_cast<u128>(rows) * static_cast<u128>(cols) + 2 * big * small);
  const u128 ns_cost = std::max<u128>(1, ns / 1'000'000'000u);
  const std::int64_t numel_cost = std::max<std::int64_t>(1, numel / 4'000'000);
  const u128 total = ns_cost + static_cast<u128>(numel_cost);
  if (total > static_cast<u128>(std::numeric_limits<std::int64_t>::max())) throw too_large();
  return static_cast<std::int64_t>(total);
}

std::int64_t parameter_cost(CostModel model, std::string_view name,
                            const std::vector<std::int64_t>& shape) {
  return model == CostModel::optimizer ? optimizer_cost(name, shape) : shape_numel(name, shape);
}

}  // namespace dmuon::partition
