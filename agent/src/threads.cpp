#include "sp/agent/threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

#include <dlfcn.h>

namespace sp::agent {
namespace {

using SetThreads = void (*)(int);

// OpenBLAS's setter, wherever the process loaded it: visible globally in a C++ trainer, only through
// its own handle when Python loaded LibTorch (extension modules are loaded RTLD_LOCAL).
SetThreads openblas_setter() {
    if (void* f = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) return reinterpret_cast<SetThreads>(f);
    for (const char* library : {"libopenblas.so.0", "libblas.so.3"}) {
        void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);  // only one already loaded
        if (!handle) continue;
        void* f = dlsym(handle, "openblas_set_num_threads");
        dlclose(handle);  // NOLOAD took a reference to a library that stays loaded
        if (f) return reinterpret_cast<SetThreads>(f);
    }
    return nullptr;
}

}  // namespace

std::string configure_threads(std::optional<int> requested) {
    const int n =
        requested ? std::max(1, *requested) : int(std::max(1u, std::thread::hardware_concurrency()));
    if (const SetThreads set_openblas_threads = openblas_setter()) {
        set_openblas_threads(n);
        at::set_num_threads(1);
        return std::to_string(n) + " threads (OpenBLAS " + std::to_string(n) + ", LibTorch's pool 1)";
    }
    at::set_num_threads(n);
    return std::to_string(n) + " threads (LibTorch's pool)";
}

}  // namespace sp::agent
