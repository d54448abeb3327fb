# The CUDA kernel sources, shared by the main build (kernels/CMakeLists.txt) and the CUDA-only
# standalone builds (kernels/cuda/standalone, tests/device). No Kokkos anywhere in them.
set(DMUON_CUDA_KERNEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/newton_schulz.cu
  ${CMAKE_CURRENT_LIST_DIR}/cublas_library.cpp)

# dmuon_link_cuda_kernels(<target> <PUBLIC|PRIVATE>): what a target holding those sources links.
# cuBLAS is not linked but opened on first use (cublas_library.hpp): by its soname, then by the
# path of the toolkit it was built against.
function(dmuon_link_cuda_kernels target scope)
  target_link_libraries(${target} ${scope} CUDA::cudart ${CMAKE_DL_LIBS})
  # Headers only (cublas_v2.h's types); CUDA::cublas's include directory is the toolkit's.
  target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE
    DMUON_CUBLAS_SONAME="libcublas.so.${CUDAToolkit_VERSION_MAJOR}"
    DMUON_CUBLAS_PATH="$<TARGET_FILE_DIR:CUDA::cublas>/libcublas.so.${CUDAToolkit_VERSION_MAJOR}")
endfunction()
