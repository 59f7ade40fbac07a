#pragma once
// One background thread that runs submitted jobs one after another, in submission order: the
// distribution profiler's measurements run there while the training step goes on. A job touches
// only what it captured (no LibTorch tensor); its result or exception comes back through the future.
// The destructor runs the jobs still queued, then joins.
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

namespace sp::agent::detail {

template <typename Result>
class SerialWorker {
  public:
    SerialWorker() = default;
    SerialWorker(const SerialWorker&) = delete;
    SerialWorker& operator=(const SerialWorker&) = delete;
    ~SerialWorker() {
        {
            const std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // Queues `job` (callable, returns Result); the thread starts with the first job.
    template <typename Job>
    std::future<Result> submit(Job job) {
        std::packaged_task<Result()> task(std::move(job));
        std::future<Result> result = task.get_future();
        {
            const std::lock_guard lock(mutex_);
            queue_.push_back(std::move(task));
            if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        }
        wake_.notify_one();
        return result;
    }

  private:
    void run() {
        for (;;) {
            std::packaged_task<Result()> task;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
                if (queue_.empty()) return;  // stopping, nothing left
                task = std::move(queue_.front());
                queue_.pop_front();
            }
            task();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::packaged_task<Result()>> queue_;
    bool stopping_ = false;
    std::thread thread_;  // last: started after the members it uses exist
};

}  // namespace sp::agent::detail
