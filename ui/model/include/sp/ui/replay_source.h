#pragma once
// A saved JSONL telemetry file as a TelemetrySource: parsed on a worker thread with
// sp::JsonlReader, delivered to the GUI thread in batches, with progress and a LoadReport.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "sp/jsonl.h"
#include "sp/ui/telemetry_source.h"

namespace sp::ui {

class ReplaySource : public TelemetrySource {
    Q_OBJECT
  public:
    // A batch closes at this many block details (records weigh 1 + their details), or after
    // kBatchMillis, whichever comes first: small batches keep the GUI responsive, big ones cheap.
    // The file's first update is a batch of its own, sent at once (the first paint waits for no more).
    static constexpr std::size_t kBatchWeight = 64 * 1024;
    static constexpr std::size_t kBatchRecords = 512;
    static constexpr int kBatchMillis = 20;
    // Batches posted to the GUI thread and not yet handled; the worker waits beyond this so a
    // slow receiver cannot make parsed records pile up in memory.
    static constexpr int kMaxBatchesInFlight = 4;

    explicit ReplaySource(QString path, QObject* parent = nullptr);
    ~ReplaySource() override;

    QString label() const override { return path_; }
    bool isLive() const override { return false; }
    // Starts the worker (once; later calls do nothing).
    void start() override;
    void stop() override;
    // Stops reading; what was read is delivered, then loadFinished (cancelled) and `loaded`.
    void cancel() override;

    const QString& path() const { return path_; }

  private:
    void run();  // the worker
    // The reader of path_, or null once the failure is reported (report->error, loadFinished).
    std::unique_ptr<sp::JsonlReader> openReader(const std::shared_ptr<LoadReport>& report, qint64 started_ns);
    // Fills the report from the reader and posts progress, loadFinished and the loaded state.
    void postFinished(const sp::JsonlReader& reader, const std::shared_ptr<LoadReport>& report,
                      bool reached_end, qint64 total, double seconds);
    // Posts `fn` to the GUI thread; it runs there unless stop() came first.
    template <typename Fn>
    void post(Fn&& fn);
    void waitForRoom();

    QString path_;
    std::thread worker_;
    std::atomic<bool> cancel_{false};
    std::atomic<bool> stopping_{false};
    bool started_ = false;
    bool stopped_ = false;  // GUI thread only: nothing is emitted after stop()
    std::mutex mutex_;
    std::condition_variable room_;
    int in_flight_ = 0;  // guarded by mutex_
};

}  // namespace sp::ui
