// The SIMT core of the emulator. A block's threads are fibers on one OS thread, run one at a time
// until each reaches a synchronization point (__syncthreads, a shuffle, its exit), in a fixed
// first-in first-out order: every run of a kernel interleaves its threads the same way, so a missing
// barrier gives the same wrong result, or the same ThreadSanitizer report, every time.
//
// For ThreadSanitizer (SIMT_TSAN_FIBERS) each CUDA thread is a TSan fiber and switches do not
// synchronize; the only happens-before edges are the ones CUDA guarantees, annotated here:
// __syncthreads orders everything before it in the block before everything after it, and a block
// starts after the work enqueued before its launch. Shuffles exchange values, not memory: no edge.
// Blocks run one after another and are ordered for TSan (their shared memory is the same storage), so
// races between blocks are not seen. This file is not instrumented: its bookkeeping is invisible to TSan.
#include "block_runner.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "fiber.h"

#if defined(SIMT_TSAN_FIBERS)
#include <sanitizer/tsan_interface.h>
#define SIMT_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#define SIMT_TSAN_RELEASE(addr) __tsan_release(addr)
#else
#define SIMT_TSAN_ACQUIRE(addr) ((void)(addr))
#define SIMT_TSAN_RELEASE(addr) ((void)(addr))
#endif

namespace simt {

namespace {

constexpr std::size_t kStackBytes = 256 * 1024;

[[noreturn]] void fatal(const char* what) {
    std::fprintf(stderr, "simt: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

enum class State { ready, at_barrier, at_shuffle, exited };

struct CudaThread {
    explicit CudaThread(void (*entry)()) : fiber(kStackBytes, entry) {}
    Fiber fiber;
    ThreadCoordinates coords{};
    unsigned linear = 0;  // index in the block; lane = linear % 32
    State state = State::ready;
};

// One OS thread's block runner: its fibers are created once and reused for every block.
class BlockRunner {
  public:
    void run_grid(dim3 grid, dim3 block, const std::function<void()>& body);
    const ThreadCoordinates& coordinates() const;
    void sync_block();
    std::uint64_t warp_exchange(unsigned mask, std::uint64_t word, unsigned src_lane);

  private:
    static void fiber_main();
    void run_block();
    void exit_thread();
    // The current thread (or the OS thread) waits: the next ready thread runs, and this one resumes
    // when it is ready and its turn comes (the OS thread: when no thread is ready).
    void wait();
    void switch_to(CudaThread* next);  // nullptr: back to the OS thread's own context
    void make_ready(CudaThread* t);
    void open_barrier();
    unsigned lanes_in_warp(unsigned warp) const;

    Fiber os_thread_;
    std::vector<std::unique_ptr<CudaThread>> threads_;
    unsigned n_threads_ = 0;  // in the running block
    CudaThread* current_ = nullptr;
    // Ready threads, first in first out: a ring of n_threads_ slots (a thread is in it at most once),
    // allocated outside the fibers, since TSan would see allocations made on them.
    std::vector<CudaThread*> ready_;
    unsigned ready_head_ = 0, ready_count_ = 0;
    const std::function<void()>* body_ = nullptr;
    unsigned live_ = 0, at_barrier_ = 0, barrier_generation_ = 0;
    // Shuffles: lane words in two buffers (generation parity), so a lane may deposit its next word
    // while slower lanes still read the last one.
    std::vector<unsigned> warp_arrived_, warp_generation_;
    std::vector<std::uint64_t> words_[2];
    // TSan synchronization objects (only their addresses matter).
    char block_start_ = 0, block_end_ = 0, barrier_[2] = {0, 0};
};

thread_local BlockRunner runner;

void BlockRunner::fiber_main() {
    for (;;) {  // one iteration per block
        SIMT_TSAN_ACQUIRE(&runner.block_start_);
        (*runner.body_)();
        runner.exit_thread();
    }
}

void BlockRunner::run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
    n_threads_ = block.x * block.y * block.z;
    while (threads_.size() < n_threads_) threads_.push_back(std::make_unique<CudaThread>(&fiber_main));
    const unsigned n_warps = (n_threads_ + kWarpSize - 1) / kWarpSize;
    warp_arrived_.assign(n_warps, 0);
    warp_generation_.assign(n_warps, 0);
    for (auto& w : words_) w.assign(n_warps * kWarpSize, 0);
    ready_.assign(n_threads_, nullptr);
    ready_head_ = ready_count_ = 0;
    body_ = &body;
    for (unsigned i = 0; i < n_threads_; ++i) {
        CudaThread& t = *threads_[i];
        t.linear = i;
        t.coords.thread_idx = uint3{i % block.x, i / block.x % block.y, i / (block.x * block.y)};
        t.coords.block_dim = block;
        t.coords.grid_dim = grid;
    }
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                for (unsigned i = 0; i < n_threads_; ++i) threads_[i]->coords.block_idx = uint3{x, y, z};
                run_block();
            }
}

void BlockRunner::run_block() {
    live_ = n_threads_;
    at_barrier_ = 0;
    for (unsigned i = 0; i < n_threads_; ++i) make_ready(threads_[i].get());
    SIMT_TSAN_RELEASE(&block_start_);
    wait();  // returns when no thread of the block is ready
    SIMT_TSAN_ACQUIRE(&block_end_);
    if (live_ == 0) return;
    unsigned at_shuffle = 0;
    for (unsigned i = 0; i < n_threads_; ++i) at_shuffle += threads_[i]->state == State::at_shuffle;
    std::fprintf(
        stderr, "simt: block (%u, %u, %u) cannot finish: %u threads wait at __syncthreads, %u at a shuffle\n",
        threads_[0]->coords.block_idx.x, threads_[0]->coords.block_idx.y, threads_[0]->coords.block_idx.z,
        at_barrier_, at_shuffle);
    fatal("a barrier or a shuffle is not reached by every thread that must reach it");
}

const ThreadCoordinates& BlockRunner::coordinates() const {
    if (!current_) fatal("a CUDA built-in variable was read outside a kernel");
    return current_->coords;
}

void BlockRunner::make_ready(CudaThread* t) {
    t->state = State::ready;
    ready_[(ready_head_ + ready_count_++) % n_threads_] = t;
}

void BlockRunner::switch_to(CudaThread* next) {
    Fiber& from = current_ ? current_->fiber : os_thread_;
    Fiber& to = next ? next->fiber : os_thread_;
    current_ = next;
    if (&from != &to) from.switch_to(to);
}

void BlockRunner::wait() {
    CudaThread* next = nullptr;
    if (ready_count_ > 0) {
        next = ready_[ready_head_];
        ready_head_ = (ready_head_ + 1) % n_threads_;
        --ready_count_;
    }
    switch_to(next);
}

void BlockRunner::open_barrier() {
    at_barrier_ = 0;
    ++barrier_generation_;
    for (unsigned i = 0; i < n_threads_; ++i)
        if (threads_[i]->state == State::at_barrier) make_ready(threads_[i].get());
}

void BlockRunner::sync_block() {
    const unsigned generation = barrier_generation_;
    SIMT_TSAN_RELEASE(&barrier_[generation & 1]);
    current_->state = State::at_barrier;
    if (++at_barrier_ == live_) open_barrier();
    wait();
    // Acquire only this barrier's releases (a thread already past it may have released into the next).
    SIMT_TSAN_ACQUIRE(&barrier_[generation & 1]);
}

void BlockRunner::exit_thread() {
    current_->state = State::exited;
    --live_;
    SIMT_TSAN_RELEASE(&block_end_);
    // Exited threads no longer count at __syncthreads (as on sm_70 and later).
    if (at_barrier_ > 0 && at_barrier_ == live_) open_barrier();
    wait();
}

unsigned BlockRunner::lanes_in_warp(unsigned warp) const {
    const unsigned first = warp * kWarpSize;
    return n_threads_ - first < kWarpSize ? n_threads_ - first : kWarpSize;
}

std::uint64_t BlockRunner::warp_exchange(unsigned mask, std::uint64_t word, unsigned src_lane) {
    CudaThread* me = current_;
    const unsigned warp = me->linear / kWarpSize, lanes = lanes_in_warp(warp);
    const unsigned full = lanes == kWarpSize ? 0xffffffffu : (1u << lanes) - 1u;
    if (mask != full) fatal("shuffle with a mask other than the whole warp: partial warps are not emulated");
    const unsigned generation = warp_generation_[warp];
    std::vector<std::uint64_t>& words = words_[generation & 1];
    words[me->linear] = word;
    me->state = State::at_shuffle;
    if (++warp_arrived_[warp] == lanes) {
        warp_arrived_[warp] = 0;
        ++warp_generation_[warp];
        for (unsigned lane = 0; lane < lanes; ++lane) make_ready(threads_[warp * kWarpSize + lane].get());
    }
    wait();
    return words[warp * kWarpSize + (src_lane < lanes ? src_lane : me->linear % kWarpSize)];
}

}  // namespace

const ThreadCoordinates& this_thread() {
    return runner.coordinates();
}

void sync_block() {
    runner.sync_block();
}

std::uint64_t warp_exchange(unsigned mask, std::uint64_t word, unsigned src_lane) {
    return runner.warp_exchange(mask, word, src_lane);
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& thread_body) {
    runner.run_grid(grid, block, thread_body);
}

}  // namespace simt
