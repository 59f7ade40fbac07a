#pragma once
// Who runs a trainer's matrix products on how many threads. Debian's LibTorch calls whatever
// libblas.so.3 is installed; OpenBLAS (the set-up script's) keeps its own thread pool beside
// LibTorch's OpenMP pool, and with both at full size on the same cores they spin against each other:
// measured on two cores, 9 steps/s against 36 for the demo model, and a small linear layer 100x
// slower on a loaded machine. So with OpenBLAS the matrix products get the threads and LibTorch's
// pool one; with another BLAS, LibTorch's pool gets them. sp-trainer and the Python package
// (selective_precision.configure_threads) both call this.
#include <optional>
#include <string>

namespace sp::agent {

// `requested` threads (nullopt: the machine's hardware threads). Returns what was set, e.g.
// "2 threads (OpenBLAS 2, LibTorch's pool 1)".
std::string configure_threads(std::optional<int> requested);

}  // namespace sp::agent
