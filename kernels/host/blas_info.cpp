// BLAS provenance and the generic-kernel check. The OpenBLAS queries are weak symbols so a
// build linked against another BLAS (MKL, BLIS) still links and reports "unknown".
#include "kernels/blas_info.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "kernels/linear.hpp"
#include "kernels/scoped_kokkos.hpp"

extern "C" {
char* openblas_get_config(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
}

namespace dmuon::kernels::host {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto s = line.substr(colon + 1);
        while (!s.empty() && s.front() == ' ') s.erase(s.begin());
        return s;
      }
    }
  return "unknown";
}

std::string cpu_features() {
  std::string s;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) s += "avx2";
  if (__builtin_cpu_supports("avx512f")) s += std::string(s.empty() ? "" : ",") + "avx512f";
#endif
  return s;
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo b;
  if (openblas_get_config != nullptr) {
    const char* c = openblas_get_config();
    b.library = c ? c : "OpenBLAS";
    while (!b.library.empty() && b.library.back() == ' ') b.library.pop_back();
  } else {
    b.library = "unknown (not OpenBLAS)";
  }
  if (openblas_get_corename != nullptr) {
    const char* c = openblas_get_corename();
    b.core = c ? c : "";
  }
  b.cpu_model = cpu_model_name();
  b.cpu_features = cpu_features();
  return b;
}

bool is_generic_core(const std::string& core) {
  std::string c;
  for (char ch : core) c += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  for (const char* g :
       {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine",
        "northwood", "banias", "generic", "opteron", "barcelona", "bobcat", "athlon"})
    if (c == g) return true;
  return false;
}

std::string generic_kernel_warning(const BlasInfo& info) {
  if (info.core.empty() || !is_generic_core(info.core)) return "";
  const bool avx512 = info.cpu_features.find("avx512f") != std::string::npos;
  const bool avx2 = info.cpu_features.find("avx2") != std::string::npos;
  if (!avx512 && !avx2) return "";
  return "OpenBLAS runs its generic '" + info.core + "' kernels on this " +
         (avx512 ? "AVX-512" : "AVX2") + " CPU (" + info.cpu_model +
         "): host GEMMs run about 4x slower than they could; set OPENBLAS_CORETYPE=" +
         (avx512 ? "SkylakeX" : "Haswell") + " (see docs/KERNELS.md)";
}

double measure_sgemm_gflops(std::size_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  require_kokkos("measure_sgemm_gflops");
  gemm(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());  // warm-up
  fence();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());
    fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(s > 0 ? 2.0 * static_cast<double>(n) * n * n / s / 1e9 : 0.0);
  }
  if (rates.empty()) return 0;
  // The median, not the best: under contention it reports what the rank actually gets.
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace dmuon::kernels::host
