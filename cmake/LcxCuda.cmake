# CUDA is detected, never required. AUTO turns it on when nvcc is found; OFF builds the CPU backend alone.
set(LCX_HAVE_CUDA OFF)
# sm_80 (A100) and sm_90 (H100/H200) by default; a GPU session builds for its own card only (e.g. 90) to halve
# nvcc's time.
set(LCX_CUDA_ARCHS "80;90" CACHE STRING "CUDA architectures the kernels are built for")
if(NOT LCX_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublasLt)
      set(LCX_HAVE_CUDA ON)
      set(CMAKE_CUDA_STANDARD 17)
      set(CMAKE_CUDA_ARCHITECTURES ${LCX_CUDA_ARCHS})
    endif()
  endif()
  if(LCX_CUDA STREQUAL "ON" AND NOT LCX_HAVE_CUDA)
    message(FATAL_ERROR "LCX_CUDA=ON but no CUDA toolkit with cuBLASLt was found (nvcc on PATH?)")
  endif()
endif()
message(STATUS "lcextend: CUDA backend ${LCX_HAVE_CUDA}")

# NCCL (the multi-GPU communicator, src/comm/comm_nccl.c): detected with CUDA, never required. Without it the
# device communicator stages through host memory (MPI), which is how several ranks share one GPU anyway.
set(LCX_HAVE_NCCL OFF)
if(LCX_HAVE_CUDA AND NOT LCX_NCCL STREQUAL "OFF")
  # LCX_NCCL_ROOT (or the environment's NCCL_ROOT): a folder with include/nccl.h and lib/, e.g. PyTorch's
  # nvidia/nccl package, which ships only libnccl.so.2.
  set(LCX_NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "where NCCL is, when not beside the CUDA toolkit")
  find_path(LCX_NCCL_INCLUDE_DIR nccl.h HINTS ${LCX_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
            /usr/local/cuda/include /usr/include)
  find_library(LCX_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
               HINTS ${LCX_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
                     /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
  if(LCX_NCCL_INCLUDE_DIR AND LCX_NCCL_LIBRARY)
    set(LCX_HAVE_NCCL ON)
  endif()
endif()
if(LCX_NCCL STREQUAL "ON" AND NOT LCX_HAVE_NCCL)
  message(FATAL_ERROR "LCX_NCCL=ON but nccl.h / libnccl were not found (with a CUDA toolkit)")
endif()
message(STATUS "lcextend: NCCL communicator ${LCX_HAVE_NCCL} ${LCX_NCCL_LIBRARY}")
