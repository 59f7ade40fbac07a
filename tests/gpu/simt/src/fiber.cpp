// Fibers for the SIMT emulator. On x86-64 a switch is a few instructions (save the callee-saved
// registers on the old stack, swap stack pointers, restore): glibc's swapcontext makes a signal-mask
// system call per switch, which would make a block's ~6,400 shuffle switches cost milliseconds. Elsewhere
// swapcontext is used.
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(SIMT_TSAN_FIBERS)
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__)
// simt_switch_stack(save_sp, load_sp): pushes the System V callee-saved registers, stores the stack
// pointer in *save_sp, loads load_sp, pops the registers saved there and returns into that context.
extern "C" void simt_switch_stack(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl simt_switch_stack
    .type simt_switch_stack, @function
simt_switch_stack:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size simt_switch_stack, .-simt_switch_stack
)");
#endif

namespace simt {

Fiber::Fiber() {
#if defined(SIMT_TSAN_FIBERS)
    tsan_ = __tsan_get_current_fiber();
#endif
}

Fiber::Fiber(std::size_t stack_bytes, void (*entry)()) {
    const auto page = std::size_t(sysconf(_SC_PAGESIZE));
    mapped_bytes_ = (stack_bytes + page - 1) / page * page + page;
    stack_ =
        mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack_ == MAP_FAILED) {
        std::fprintf(stderr, "simt: cannot map a fiber stack\n");
        std::abort();
    }
    mprotect(stack_, page, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
    auto* top = static_cast<unsigned char*>(stack_) + mapped_bytes_;
#if defined(__x86_64__)
    // What simt_switch_stack pops: six registers, then `entry` as the return address, above it a null
    // return address for `entry` itself; `entry` then starts with rsp = 8 mod 16, as after a call.
    auto* slot = reinterpret_cast<void**>(top) - 8;
    for (int i = 0; i < 6; ++i) slot[i] = nullptr;
    slot[6] = reinterpret_cast<void*>(entry);
    slot[7] = nullptr;
    sp_ = slot;
#else
    getcontext(&context_);
    context_.uc_stack.ss_sp = static_cast<unsigned char*>(stack_) + page;
    context_.uc_stack.ss_size = mapped_bytes_ - page;
    context_.uc_link = nullptr;
    makecontext(&context_, entry, 0);
#endif
#if defined(SIMT_TSAN_FIBERS)
    tsan_ = __tsan_create_fiber(0);
    owns_tsan_ = true;
#endif
}

Fiber::~Fiber() {
#if defined(SIMT_TSAN_FIBERS)
    if (owns_tsan_) __tsan_destroy_fiber(tsan_);
#endif
    if (stack_) munmap(stack_, mapped_bytes_);
}

void Fiber::switch_to(Fiber& next) {
#if defined(SIMT_TSAN_FIBERS)
    // No synchronization: only the emulator's explicit acquire/release orders fibers for TSan.
    __tsan_switch_to_fiber(next.tsan_, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
    simt_switch_stack(&sp_, next.sp_);
#else
    swapcontext(&context_, &next.context_);
#endif
}

}  // namespace simt
