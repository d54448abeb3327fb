// dmuon_ns_emulate: the CUDA Newton–Schulz op sequence (kernels/cuda/ns_plan.hpp) on the CPU
// with the GPU's rounding points (ns_emulation.hpp), against an fp64 oracle, for every storage
// type and a choice of numerics. No GPU needed. It produced the numbers behind plan::ns_numerics
// and the NS bounds of dmuon_cuda_check and tests/kernels/ns_emulation_test.cpp
// (docs/KERNELS.md); rerun it when either changes.
//
//   dmuon_ns_emulate [--input dyadic|gaussian|product|rank] [--fp32-acc] [--shape RxC]...
//
// Inputs: dyadic = dmuon_cuda_check's (k/64, k uniform in [-255, 255]); gaussian; product =
// A·B with standard normal A (R×m), B (m×C), m = min(R, C): a gradient averaged over as many
// samples as it has columns (ill-conditioned; square: σ_min ≈ 0); rank = the same with
// m = min(R, C)/4 (rank-deficient). Output: relative Frobenius error vs fp64 per numerics.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/standalone/ns_emulation.hpp"

namespace {

using namespace dmuon::kernels;
namespace plan = dmuon::kernels::cuda::plan;
namespace emu = dmuon::kernels::cuda::emulation;

const char* tname(Dtype t) {
  return t == Dtype::f32 ? "f32" : (t == Dtype::bf16 ? "bf16" : "f16");
}

std::vector<float> make_input(const std::string& kind, std::size_t rows, std::size_t cols) {
  const std::size_t m = std::min(rows, cols);
  if (kind == "product") return emu::product(rows, m, cols, 7);
  if (kind == "rank") return emu::product(rows, std::max<std::size_t>(1, m / 4), cols, 7);
  if (kind == "gaussian") {
    std::mt19937 gen(7);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> g(rows * cols);
    for (auto& v : g) v = d(gen);
    return g;
  }
  return emu::dyadic(rows, cols, 7);
}

}  // namespace

int main(int argc, char** argv) {
  std::string input = "dyadic";
  bool fp32_acc = false;
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    std::size_t r = 0, c = 0;
    if (std::strcmp(argv[i], "--fp32-acc") == 0) {
      fp32_acc = true;
    } else if (std::strcmp(argv[i], "--input") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "dyadic") == 0 ||
                std::strcmp(argv[i + 1], "gaussian") == 0 ||
                std::strcmp(argv[i + 1], "product") == 0 ||
                std::strcmp(argv[i + 1], "rank") == 0)) {
      input = argv[++i];
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%zux%zu", &r, &c) == 2 && r > 0 && c > 0) {
      shapes.emplace_back(r, c);
      ++i;
    } else {
      std::fprintf(stderr,
                   "dmuon_ns_emulate: bad argument '%s' (usage: dmuon_ns_emulate [--input "
                   "dyadic|gaussian|product|rank] [--fp32-acc] [--shape RxC]...)\n",
                   argv[i]);
      return 2;
    }
  }
  if (shapes.empty()) shapes = {{64, 192}, {192, 64}, {33, 70}, {160, 320}, {128, 128}, {96, 96}};
  struct Column {
    Dtype storage;
    plan::Numerics num;
    bool rule;  ///< plan::ns_numerics' choice for --ns gram (per shape: filled in below)
  };
  std::vector<Column> columns;
  for (Dtype st : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    columns.push_back({st, {NsVariant::direct, st, st}, false});
    if (st != Dtype::f32) columns.push_back({st, {NsVariant::gram, Dtype::f16, Dtype::f16}, false});
    if (st != Dtype::f32) columns.push_back({st, {NsVariant::gram, st, Dtype::f32}, false});
    columns.push_back({st, {NsVariant::gram, Dtype::f32, Dtype::f32}, false});
    columns.push_back({st, {}, true});
  }
  std::printf(
      "# input %s; GEMM accumulation: %s; relative Frobenius error vs fp64 of the stored "
      "input; columns storage:form/x/gram (rule = plan::ns_numerics for --ns gram)\n",
      input.c_str(), fp32_acc ? "sequential fp32" : "exact, rounded once");
  std::printf("# %-9s %-13s", "shape", "coefficients");
  for (const Column& c : columns) {
    const std::string col = std::string(tname(c.storage)) + ":" +
                            (c.rule ? std::string("rule")
                                    : std::string(to_string(c.num.form)) + "/" + tname(c.num.x) +
                                          "/" + tname(c.num.gram));
    std::printf(" %18s", col.c_str());
  }
  std::printf("\n");
  for (const auto& [rows, cols] : shapes) {
    const std::vector<float> g = make_input(input, rows, cols);
    for (auto set : {NsCoefficientSet::classic_muon, NsCoefficientSet::polar_express}) {
      NsConfig cfg;
      cfg.coefficients = set;
      std::printf("  %4zux%-4zu %-13s", rows, cols, std::string(to_string(set)).c_str());
      for (const Column& c : columns) {
        const plan::Numerics num =
            c.rule ? plan::ns_numerics(plan::ns_shape(rows, cols), c.storage, NsVariant::gram)
                   : c.num;
        std::printf(" %18.2e", emu::ns_error(g, rows, cols, cfg, c.storage, num, fp32_acc));
      }
      std::printf("\n");
    }
  }
  return 0;
}
