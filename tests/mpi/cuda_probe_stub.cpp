#include <stdexcept>

#include "cuda_probe.hpp"

namespace dmuon::test {

int visible_cuda_devices() {
  return 0;
}
void* device_alloc(std::size_t) {
  throw std::runtime_error("built without CUDA");
}
void device_free(void*) {}
void copy_to_device(void*, const void*, std::size_t) {
  throw std::runtime_error("built without CUDA");
}
void copy_to_host(void*, const void*, std::size_t) {
  throw std::runtime_error("built without CUDA");
}

}  // namespace dmuon::test
