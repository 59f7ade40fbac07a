# CUDA is detected, never required. SP_HAVE_CUDA tells later targets (agent/cuda) whether nvcc works
# here; when it does, the CUDA language is enabled here, at the top level, because every target that
# links CUDA objects (tests, benchmarks, sp_agent) needs it for its link step.
# -DSP_ENABLE_CUDA=OFF (or -DCMAKE_CUDA_COMPILER=<a path that does not exist>) builds CPU paths only.
option(SP_ENABLE_CUDA "Build the CUDA kernels when a working CUDA compiler is found" ON)
include(CheckLanguage)
set(SP_HAVE_CUDA OFF)
if(SP_ENABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # check_language() keeps a CMAKE_CUDA_COMPILER that is already set, even a wrong one.
  if(DEFINED CMAKE_CUDA_COMPILER AND IS_ABSOLUTE "${CMAKE_CUDA_COMPILER}" AND NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    message(STATUS "Selective Precision: CMAKE_CUDA_COMPILER ${CMAKE_CUDA_COMPILER} does not exist")
  else()
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(SP_HAVE_CUDA ON)
    endif()
  endif()
endif()

if(SP_HAVE_CUDA)
  # Data-centre GPUs by default (A100: sm_80 code; H100/H200: sm_90 code plus compute_90 PTX that
  # newer GPUs JIT), unless the user chose (-DCMAKE_CUDA_ARCHITECTURES or CUDAARCHS).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  # ccache understands nvcc too (SP_CCACHE comes from Warnings.cmake).
  if(SP_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${SP_CCACHE})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "Selective Precision: CUDA compiler found: ${CMAKE_CUDA_COMPILER} (architectures: ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "Selective Precision: no CUDA compiler; building CPU paths only")
endif()
