// cuBLAS opened with dlopen on first use (cublas_library.hpp says why).
#include "kernels/cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <type_traits>

#include "kernels/kernel_error.hpp"

#ifndef DMUON_CUBLAS_SONAME
#error "DMUON_CUBLAS_SONAME (e.g. \"libcublas.so.13\") comes from kernels/cuda/sources.cmake"
#endif
#ifndef DMUON_CUBLAS_PATH
#error "DMUON_CUBLAS_PATH (the toolkit's libcublas) comes from kernels/cuda/sources.cmake"
#endif

namespace dmuon::kernels::cuda {

namespace {

// The table's types are the header's own declarations (a mismatch does not compile; unevaluated,
// so nothing here links to cuBLAS). cublasGemmEx is overloaded: the cast picks the exact one.
template <class T, class U>
constexpr bool same = std::is_same_v<T, U>;
static_assert(same<decltype(&cublasCreate_v2), decltype(CublasLibrary::create)>);
static_assert(same<decltype(&cublasDestroy_v2), decltype(CublasLibrary::destroy)>);
static_assert(same<decltype(&cublasSetStream_v2), decltype(CublasLibrary::set_stream)>);
static_assert(same<decltype(&cublasSetWorkspace_v2), decltype(CublasLibrary::set_workspace)>);
static_assert(same<decltype(&cublasSetMathMode), decltype(CublasLibrary::set_math_mode)>);
static_assert(same<decltype(&cublasGetStatusString), decltype(CublasLibrary::status_string)>);
static_assert(sizeof(static_cast<decltype(CublasLibrary::gemm_ex)>(&cublasGemmEx)) > 0);
static_assert(sizeof(static_cast<decltype(CublasLibrary::gemm_batched_ex)>(&cublasGemmBatchedEx)) >
              0);

// Resolves `name` into `fn`; false (and `missing` set) when the library lacks it.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& fn, std::string& missing) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    missing = name;
    return false;
  }
  fn = reinterpret_cast<Fn>(sym);
  return true;
}

bool resolve_all(void* h, CublasLibrary& l, std::string& missing) {
  return resolve(h, "cublasCreate_v2", l.create, missing) &&
         resolve(h, "cublasDestroy_v2", l.destroy, missing) &&
         resolve(h, "cublasSetStream_v2", l.set_stream, missing) &&
         resolve(h, "cublasSetWorkspace_v2", l.set_workspace, missing) &&
         resolve(h, "cublasSetMathMode", l.set_math_mode, missing) &&
         resolve(h, "cublasGemmEx", l.gemm_ex, missing) &&
         resolve(h, "cublasGemmBatchedEx", l.gemm_batched_ex, missing) &&
         resolve(h, "cublasGetStatusString", l.status_string, missing);
}

}  // namespace

CublasLibrary open_cublas(const std::vector<std::string>& candidates) {
  std::string why;
  for (const std::string& name : candidates) {
    // RTLD_LOCAL: the kernels call through the table, nothing else binds to cuBLAS's symbols.
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      why += "; " + name + ": " + (err ? err : "dlopen failed");
      continue;
    }
    CublasLibrary lib;
    std::string missing;
    if (resolve_all(handle, lib, missing)) return lib;  // kept open for the process's lifetime
    why += "; " + name + ": no symbol " + missing;
    dlclose(handle);
  }
  throw KernelError("cannot open cuBLAS, which --device cuda needs" +
                    (why.empty() ? std::string(" (no candidate library)") : why));
}

const CublasLibrary& cublas_library() {
  // A failed open is remembered: every later CUDA context reports the same cause.
  struct Opened {
    CublasLibrary lib;
    std::string error;
  };
  static const Opened opened = [] {
    Opened o;
    try {
      o.lib = open_cublas({DMUON_CUBLAS_SONAME, DMUON_CUBLAS_PATH});
    } catch (const KernelError& e) {
      o.error = e.what();
    }
    return o;
  }();
  if (!opened.error.empty()) throw KernelError(opened.error);
  return opened.lib;
}

}  // namespace dmuon::kernels::cuda
