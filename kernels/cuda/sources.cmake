# The CUDA kernel sources, shared by the main build (kernels/CMakeLists.txt) and the CUDA-only
# standalone build (kernels/cuda/standalone). No Kokkos anywhere in them.
set(DMUON_CUDA_KERNEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/newton_schulz.cu)
