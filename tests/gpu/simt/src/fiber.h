#pragma once
// A minimal fiber: its own stack and a switch that saves the running context and resumes another.
// With SIMT_TSAN_FIBERS each fiber is also a ThreadSanitizer fiber, and switches do not synchronize:
// TSan sees the fibers as threads ordered only by what the emulator annotates (block_runner.cpp).
#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace simt {

class Fiber {
  public:
    // The calling OS thread's own context.
    Fiber();
    // A new context that starts in `entry` on first switch; `entry` must never return.
    Fiber(std::size_t stack_bytes, void (*entry)());
    ~Fiber();
    Fiber(const Fiber&) = delete;
    Fiber& operator=(const Fiber&) = delete;

    // Suspends this fiber (the running one) and resumes `next`.
    void switch_to(Fiber& next);

  private:
    void* stack_ = nullptr;  // mapping: guard page, then the stack
    std::size_t mapped_bytes_ = 0;
#if defined(SIMT_TSAN_FIBERS)  // private to the library: every file that includes this sees the same layout
    void* tsan_ = nullptr;
    bool owns_tsan_ = false;
#endif
#if defined(__x86_64__)
    void* sp_ = nullptr;  // saved stack pointer while suspended
#else
    ucontext_t context_;
#endif
};

}  // namespace simt
