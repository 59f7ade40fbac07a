#pragma once
// A host callback that holds a CUDA stream: the GPU tests enqueue it, then check that a call
// returns while the stream is held (it made no host synchronization).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace sp::test {

// Enqueue with cudaLaunchHostFunc(stream, &StreamGate::hold, &gate); the stream stays held until
// `open` is set, or 20 s pass (then `timed_out`), so a bug cannot hang the run.
struct StreamGate {
    std::atomic<bool> open{false};
    std::atomic<bool> timed_out{false};
    static void CUDART_CB hold(void* self) {
        auto* g = static_cast<StreamGate*>(self);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!g->open.load()) {
            if (std::chrono::steady_clock::now() > until) {
                g->timed_out = true;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
};

}  // namespace sp::test
