// The CUDA runtime for the SIMT emulator: device and pinned memory are host memory (tracked, so copies
// are checked for direction and bounds), every stream is a worker thread that runs its work in order,
// events are positions in a stream, and kernels run on their stream's worker (block_runner.cpp).
// Semantics kept because the launcher relies on them:
// - cudaMallocAsync hands back the pointer at the call; cudaFreeAsync frees in stream order.
// - Copies from pageable host memory are staged before the call returns; copies to pageable memory
//   complete before it returns; copies to and from pinned memory are asynchronous, in stream order.
// - cudaStreamWaitEvent waits for the event's record as of the call (not a later re-record).
// - The legacy default stream (nullptr) waits for earlier work of every blocking stream, and
//   blocking streams wait for earlier work of the legacy stream; non-blocking streams do neither.
// Under ThreadSanitizer (SIMT_TSAN_FIBERS) the runtime's one lock orders nothing: on a GPU an API call
// does not synchronize the host with the device. Only the edges CUDA guarantees are annotated: a call
// that enqueues work happens before that work, work happens before later work of its stream and work
// that waits for it, and completed work happens before a host wait that covers it returns (event or
// stream synchronization, a successful event query, a blocking copy). A missing wait is then a race.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "block_runner.h"
#include "simt/device.h"
#include "simt/runtime_api.h"

#if defined(SIMT_TSAN_FIBERS)
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreSyncBegin(const char* file, int line);
extern "C" void AnnotateIgnoreSyncEnd(const char* file, int line);
#define SIMT_IGNORE_SYNC_BEGIN() AnnotateIgnoreSyncBegin(__FILE__, __LINE__)
#define SIMT_IGNORE_SYNC_END() AnnotateIgnoreSyncEnd(__FILE__, __LINE__)
#define SIMT_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#define SIMT_TSAN_RELEASE(addr) __tsan_release(addr)
#else
#define SIMT_IGNORE_SYNC_BEGIN() ((void)0)
#define SIMT_IGNORE_SYNC_END() ((void)0)
#define SIMT_TSAN_ACQUIRE(addr) ((void)(addr))
#define SIMT_TSAN_RELEASE(addr) ((void)(addr))
#endif

namespace {

// A point in a stream's work: done when `stream` has completed `seq` items.
struct Position {
    CUstream_st* stream = nullptr;
    std::uint64_t seq = 0;
};

struct Work {
    std::function<void()> run;    // empty for markers (event records, waits)
    std::vector<Position> after;  // starts only when these are done
};

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

}  // namespace

struct CUstream_st {
    static constexpr std::uint64_t kMarks = 64;
    bool legacy = false;
    bool blocking = true;  // orders against the legacy default stream
    std::deque<Work> queue;
    std::uint64_t enqueued = 0, completed = 0;
    bool stopping = false;
    std::thread worker;
    // TSan: item k's completion is released to marks[k % kMarks] (a later item's release there only
    // adds a later state of the same worker, so waiting for k acquires at least k's effects).
    char marks[kMarks] = {};
    char* mark(std::uint64_t seq) { return &marks[seq % kMarks]; }
};

struct CUevent_st {
    Position recorded;  // stream == nullptr: never recorded
};

namespace {

// The runtime's lock, whose synchronization TSan does not see (see the top of this file). Only one is
// held at a time, so the annotated edges below are never inside a nested ignore.
class HiddenLock {
  public:
    explicit HiddenLock(std::mutex& m) : lock_(m, std::defer_lock) { lock(); }
    ~HiddenLock() {
        if (lock_.owns_lock()) unlock();
    }
    HiddenLock(const HiddenLock&) = delete;
    HiddenLock& operator=(const HiddenLock&) = delete;
    void lock() {
        SIMT_IGNORE_SYNC_BEGIN();
        lock_.lock();
    }
    void unlock() {
        lock_.unlock();
        SIMT_IGNORE_SYNC_END();
    }
    std::unique_lock<std::mutex>& get() { return lock_; }
    // A happens-before edge CUDA guarantees, annotated while the lock is held.
    static void release(void* addr) {
        SIMT_IGNORE_SYNC_END();
        SIMT_TSAN_RELEASE(addr);
        SIMT_IGNORE_SYNC_BEGIN();
    }
    static void acquire(void* addr) {
        SIMT_IGNORE_SYNC_END();
        SIMT_TSAN_ACQUIRE(addr);
        SIMT_IGNORE_SYNC_BEGIN();
    }

  private:
    std::unique_lock<std::mutex> lock_;
};

enum class Memory { pageable, device, pinned, out_of_bounds };

struct Allocation {
    std::size_t bytes;
    Memory kind;
};

class Device {
  public:
    static Device& get() {
        static Device device;
        return device;
    }
    Device() {
        legacy_.legacy = true;
        start(&legacy_);
    }
    ~Device() {
        for (CUstream_st* s : streams_) stop(s);
        stop(&legacy_);
    }

    HiddenLock lock() { return HiddenLock(m_); }
    CUstream_st* stream(cudaStream_t s) { return s ? s : &legacy_; }

    // Appends work to `s` (lock held); returns its position.
    Position enqueue(HiddenLock&, cudaStream_t handle, std::function<void()> run, Position also_after = {}) {
        CUstream_st* s = stream(handle);
        Work w{std::move(run), {}};
        if (s->legacy) {
            for (CUstream_st* b : streams_)
                if (b->blocking) w.after.push_back({b, b->enqueued});
        } else if (s->blocking) {
            w.after.push_back({&legacy_, legacy_.enqueued});
        }
        if (also_after.stream) w.after.push_back(also_after);
        s->queue.push_back(std::move(w));
        HiddenLock::release(&s->queue.back());  // the caller's writes so far are visible to the work
        cv_.notify_all();
        return {s, ++s->enqueued};
    }
    void wait_for(HiddenLock& lock, Position p) {
        cv_.wait(lock.get(), [&] { return done(p); });
        acquire(p);
    }
    // The effects of the work up to `p`, once it is done.
    static void acquire(Position p) {
        if (p.stream && p.seq > 0) HiddenLock::acquire(p.stream->mark(p.seq));
    }
    static bool done(Position p) { return !p.stream || p.stream->completed >= p.seq; }
    void synchronize(HiddenLock& lock) {  // everything enqueued so far, every stream
        wait_for(lock, {&legacy_, legacy_.enqueued});
        for (CUstream_st* s : streams_) wait_for(lock, {s, s->enqueued});
    }

    CUstream_st* create_stream(bool blocking) {
        auto* s = new CUstream_st;
        s->blocking = blocking;
        start(s);
        auto l = lock();
        streams_.push_back(s);
        return s;
    }
    bool destroy_stream(CUstream_st* s) {
        {
            auto l = lock();
            auto it = std::find(streams_.begin(), streams_.end(), s);
            if (it == streams_.end()) return false;
            streams_.erase(it);
        }
        stop(s);
        auto l = lock();
        // Its work is done: drop waits on it, so no queue points at the deleted stream.
        auto drop_waits = [s](CUstream_st* q) {
            for (Work& w : q->queue)
                w.after.erase(std::remove_if(w.after.begin(), w.after.end(),
                                             [s](const Position& p) { return p.stream == s; }),
                              w.after.end());
        };
        for (CUstream_st* other : streams_) drop_waits(other);
        drop_waits(&legacy_);
        delete s;
        return true;
    }

    void* allocate(std::size_t bytes, Memory kind) {  // 256-byte aligned, as cudaMalloc
        void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        if (p) {
            auto l = lock();
            allocations_[reinterpret_cast<std::uintptr_t>(p)] = Allocation{bytes, kind};
        }
        return p;
    }
    // Forgets the allocation at `p`; false when `p` is not one of `kind`.
    bool forget(void* p, Memory kind) {
        auto l = lock();
        auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(p));
        if (it == allocations_.end() || it->second.kind != kind) return false;
        allocations_.erase(it);
        return true;
    }
    // What [p, p + bytes) is: inside one tracked allocation, untracked (pageable), or straddling an end.
    Memory classify(const void* p, std::size_t bytes) {
        auto l = lock();
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        auto it = allocations_.upper_bound(a);
        if (it == allocations_.begin()) return Memory::pageable;
        --it;
        if (a >= it->first + it->second.bytes) return Memory::pageable;
        return a + bytes <= it->first + it->second.bytes ? it->second.kind : Memory::out_of_bounds;
    }

  private:
    void start(CUstream_st* s) {
        s->worker = std::thread([this, s] { serve(s); });
    }
    void stop(CUstream_st* s) {
        {
            auto l = lock();
            s->stopping = true;
            cv_.notify_all();
        }
        s->worker.join();
    }
    void serve(CUstream_st* s) {
        auto l = lock();
        for (;;) {
            cv_.wait(l.get(), [&] {
                if (s->queue.empty()) return s->stopping;
                const auto& after = s->queue.front().after;
                return std::all_of(after.begin(), after.end(), &Device::done);
            });
            if (s->queue.empty()) return;
            Work& w = s->queue.front();
            HiddenLock::acquire(&w);  // the enqueuing call
            for (const Position& p : w.after) acquire(p);
            std::function<void()> run = std::move(w.run);
            l.unlock();
            if (run) run();
            l.lock();
            s->queue.pop_front();
            ++s->completed;
            HiddenLock::release(s->mark(s->completed));
            cv_.notify_all();
        }
    }

    std::mutex m_;
    std::condition_variable cv_;
    CUstream_st legacy_;
    std::vector<CUstream_st*> streams_;  // created, not destroyed
    std::map<std::uintptr_t, Allocation> allocations_;
};

bool is_device(Memory m) {
    return m == Memory::device;
}

// Every copy: checks `kind` against where the pointers are, then runs it in `stream`'s order.
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                 bool wait) {
    if (bytes == 0) return cudaSuccess;
    Device& dev = Device::get();
    const Memory to = dev.classify(dst, bytes), from = dev.classify(src, bytes);
    if (to == Memory::out_of_bounds || from == Memory::out_of_bounds) return fail(cudaErrorInvalidValue);
    const bool want_to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (is_device(to) != want_to_device || is_device(from) != want_from_device)
        return fail(cudaErrorInvalidValue);
    std::function<void()> run = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
    if (from == Memory::pageable) {  // staged now: the caller may reuse its buffer at once
        auto staged = std::make_shared<std::vector<unsigned char>>(
            static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
        run = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
    }
    auto l = dev.lock();
    const Position p = dev.enqueue(l, stream, std::move(run));
    if (wait || to == Memory::pageable) dev.wait_for(l, p);
    return cudaSuccess;
}

}  // namespace

namespace simt {

void enqueue_grid(const LaunchConfig& cfg, std::function<void()> thread_body) {
    const dim3 b = cfg.block, g = cfg.grid;
    const bool valid = b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
                       std::uint64_t(b.x) * b.y * b.z <= 1024 && g.x >= 1 && g.y >= 1 && g.z >= 1 &&
                       g.x <= 0x7fffffffu && g.y <= 65535 && g.z <= 65535 && cfg.shared_bytes == 0;
    if (!valid) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    Device& dev = Device::get();
    auto l = dev.lock();
    dev.enqueue(l, cfg.stream, [g, b, body = std::move(thread_body)] { run_grid(g, b, body); });
}

}  // namespace simt

const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidResourceHandle:
            return "invalid resource handle";
        case cudaErrorNotReady:
            return "device not ready";
    }
    return "unrecognized error code";
}

cudaError_t cudaGetLastError() {
    return std::exchange(last_error, cudaSuccess);
}

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    const auto page = std::size_t(sysconf(_SC_PAGESIZE));
    *free_bytes = std::size_t(sysconf(_SC_AVPHYS_PAGES)) * page;
    *total_bytes = std::size_t(sysconf(_SC_PHYS_PAGES)) * page;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
    *ptr = bytes ? Device::get().allocate(bytes, Memory::device) : nullptr;
    return *ptr || !bytes ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t) {
    return cudaMalloc(ptr, bytes);  // the pointer is valid at once; its memory in stream order
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
    *ptr = Device::get().allocate(bytes, Memory::pinned);
    return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* ptr) {  // synchronizes the device, as cudaFree does
    if (!ptr) return cudaSuccess;
    Device& dev = Device::get();
    {
        auto l = dev.lock();
        dev.synchronize(l);
    }
    if (!dev.forget(ptr, Memory::device)) return fail(cudaErrorInvalidValue);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
    if (!ptr) return cudaSuccess;
    Device& dev = Device::get();
    if (!dev.forget(ptr, Memory::device)) return fail(cudaErrorInvalidValue);  // later copies see it gone
    auto l = dev.lock();
    dev.enqueue(l, stream, [ptr] { std::free(ptr); });
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
    Device& dev = Device::get();
    {
        auto l = dev.lock();
        dev.synchronize(l);
    }
    if (!dev.forget(ptr, Memory::pinned)) return fail(cudaErrorInvalidValue);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return copy(dst, src, bytes, kind, stream, false);
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
    Device& dev = Device::get();
    if (bytes && dev.classify(ptr, bytes) != Memory::device) return fail(cudaErrorInvalidValue);
    auto l = dev.lock();
    dev.enqueue(l, nullptr, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
    *stream = Device::get().create_stream((flags & cudaStreamNonBlocking) == 0);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    return stream && Device::get().destroy_stream(stream) ? cudaSuccess
                                                          : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    Device& dev = Device::get();
    auto l = dev.lock();
    CUstream_st* s = dev.stream(stream);
    dev.wait_for(l, {s, s->enqueued});
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
    Device& dev = Device::get();
    auto l = dev.lock();
    dev.enqueue(l, stream, [fn, user_data] { fn(user_data); });
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
    *event = new CUevent_st;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    Device& dev = Device::get();
    auto l = dev.lock();
    event->recorded = dev.enqueue(l, stream, {});  // a marker, so the legacy stream's ordering applies
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    Device& dev = Device::get();
    auto l = dev.lock();
    if (!Device::done(event->recorded)) return cudaErrorNotReady;
    Device::acquire(event->recorded);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    Device& dev = Device::get();
    auto l = dev.lock();
    dev.wait_for(l, event->recorded);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
    Device& dev = Device::get();
    auto l = dev.lock();
    dev.enqueue(l, stream, {}, event->recorded);  // the record as of now
    return cudaSuccess;
}
