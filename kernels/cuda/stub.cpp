// Built when DMUON_HAVE_CUDA is OFF: the same symbols as the CUDA kernels, each throwing, so
// callers link and branch at run time (cuda::compiled()) instead of with #ifdef.
#include "kernels/cuda/kernels.hpp"
#include "kernels/kernel_error.hpp"

namespace dmuon::kernels::cuda {

namespace {
[[noreturn]] void not_compiled() {
  throw KernelError("CUDA kernels not compiled: rebuild with -DDMUON_ENABLE_CUDA=ON");
}
}  // namespace

struct Context::Impl {};
struct NsWorkspace::Impl {};

std::size_t storage_bytes(Storage storage) {
  return storage == Storage::f32 ? 4 : 2;
}
std::string_view to_string(Storage storage) {
  return storage == Storage::f32 ? "f32" : (storage == Storage::bf16 ? "bf16" : "f16");
}
bool compiled() {
  return false;
}
int device_count() {
  not_compiled();
}

Context::Context(void*) {
  not_compiled();
}
Context::~Context() = default;
void* Context::stream() const {
  not_compiled();
}
void Context::synchronize() const {
  not_compiled();
}

NsWorkspace::NsWorkspace(std::size_t, std::size_t, Storage) {
  not_compiled();
}
NsWorkspace::~NsWorkspace() = default;
std::size_t NsWorkspace::rows() const {
  not_compiled();
}
std::size_t NsWorkspace::cols() const {
  not_compiled();
}
Storage NsWorkspace::storage() const {
  not_compiled();
}

void newton_schulz(Context&, const void*, void*, std::size_t, std::size_t, Storage, const NsConfig&,
                   NsWorkspace&, std::string_view) {
  not_compiled();
}
void muon_step(Context&, float*, const float*, float*, std::size_t, std::size_t, long,
               const MuonConfig&, NsWorkspace&, std::string_view) {
  not_compiled();
}
void adamw_step(Context&, float*, const float*, float*, float*, std::size_t, long,
                const AdamWConfig&, std::string_view) {
  not_compiled();
}
std::size_t pack(Context&, const ConstSlice*, std::size_t, float*, std::size_t) {
  not_compiled();
}
void unpack(Context&, const float*, std::size_t, const Slice*, std::size_t) {
  not_compiled();
}
void average_gradient(Context&, float*, std::size_t, int) {
  not_compiled();
}
void gemm(Context&, Storage, bool, bool, std::size_t, std::size_t, std::size_t, float, const void*,
          const void*, float, void*) {
  not_compiled();
}
void convert_from_f32(Context&, const float*, void*, std::size_t, Storage) {
  not_compiled();
}
void convert_to_f32(Context&, const void*, float*, std::size_t, Storage) {
  not_compiled();
}
void* device_alloc(std::size_t) {
  not_compiled();
}
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, std::size_t) {
  not_compiled();
}
void copy_to_host(void*, const void*, std::size_t) {
  not_compiled();
}

EventTimer::EventTimer(Context&) : stream_(nullptr) {
  not_compiled();
}
EventTimer::~EventTimer() = default;
void EventTimer::start() {
  not_compiled();
}
float EventTimer::stop_ms() {
  not_compiled();
}

}  // namespace dmuon::kernels::cuda
