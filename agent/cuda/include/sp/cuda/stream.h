#pragma once
// The CUDA stream the kernel launchers take, without CUDA headers: CUstream_st* is what cudaStream_t
// and CUstream are.
struct CUstream_st;

namespace sp::cuda {

using Stream = CUstream_st*;  // nullptr: the legacy default stream

}  // namespace sp::cuda
