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

bool compiled() {
  return false;
}
int device_count() {
  not_compiled();
}
std::string device_name(int) {
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

unsigned long long* alloc_counters(std::size_t) {
  not_compiled();
}
void free_counters(unsigned long long*) noexcept {}
void zero_counters(Context&, unsigned long long*, std::size_t) {
  not_compiled();
}
void read_counters(Context&, const unsigned long long*, std::size_t, unsigned long long*) {
  not_compiled();
}

void convert(Context&, const void*, Storage, void*, Storage, std::size_t) {
  not_compiled();
}
void convert_from_f32(Context&, const float*, void*, std::size_t, Storage) {
  not_compiled();
}
void convert_to_f32(Context&, const void*, float*, std::size_t, Storage) {
  not_compiled();
}
void synthetic_rows(Context&, void*, Storage, std::size_t, std::size_t, std::uint64_t,
                    std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) {
  not_compiled();
}
void synthetic_grad_none(Context&, const void*, Storage, void*, Storage, std::size_t, std::uint64_t,
                         std::uint64_t, std::uint64_t, std::uint64_t, float, bool) {
  not_compiled();
}
void residual_scale(Context&, void*, const void*, Storage, std::size_t, float) {
  not_compiled();
}
void muon_momentum(Context&, const void*, Storage, float*, void*, Storage, std::size_t, long, float,
                   bool, unsigned long long*) {
  not_compiled();
}
void muon_apply(Context&, float*, const void*, Storage, std::size_t, float, float, float,
                unsigned long long*) {
  not_compiled();
}
void adamw_step(Context&, float*, const void*, Storage, float*, float*, std::size_t, long,
                const AdamWConfig&, unsigned long long*) {
  not_compiled();
}
void average_gradient(Context&, float*, std::size_t, int) {
  not_compiled();
}
void clip_partial_reset(Context&, ClipPartial*) {
  not_compiled();
}
void clip_partial_add(Context&, const void*, Storage, std::size_t, bool, ClipPartial*) {
  not_compiled();
}
void clip_partial_finish(Context&, const ClipPartial*, bool, float*) {
  not_compiled();
}
void clip_scale(Context&, void*, Storage, std::size_t, const float*, bool, double) {
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
std::size_t NsWorkspace::bytes() const {
  not_compiled();
}
int NsWorkspace::symmetric_blocks() const {
  not_compiled();
}
void NsWorkspace::set_symmetric_blocks(int) {
  not_compiled();
}
bool NsWorkspace::direct_symmetric() const {
  not_compiled();
}
void NsWorkspace::set_direct_symmetric(bool) {
  not_compiled();
}
NsNumerics NsWorkspace::numerics(NsVariant) const {
  not_compiled();
}
void NsWorkspace::set_numerics(const NsNumerics&) {
  not_compiled();
}
void NsWorkspace::clear_numerics() {
  not_compiled();
}

void newton_schulz(Context&, const void*, void*, std::size_t, std::size_t, Storage, const NsConfig&,
                   NsWorkspace&, unsigned long long*) {
  not_compiled();
}
void muon_step(Context&, float*, const float*, float*, std::size_t, std::size_t, long,
               const MuonConfig&, NsWorkspace&, unsigned long long*) {
  not_compiled();
}
void gemm(Context&, Storage, bool, bool, std::size_t, std::size_t, std::size_t, float, const void*,
          const void*, float, void*) {
  not_compiled();
}
void gemm(Context&, Storage, Storage, bool, bool, std::size_t, std::size_t, std::size_t, float,
          const void*, const void*, float, void*) {
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
