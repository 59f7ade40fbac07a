#pragma once
// Stand-in for the header a CUDA build of LibTorch generates. Used only by the compile-only check of
// the CUDA glue against a CPU LibTorch's c10/cuda headers (agent/CMakeLists.txt); nothing built with
// it is linked or run.
#define C10_CUDA_BUILD_SHARED_LIBS
