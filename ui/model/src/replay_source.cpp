#include "sp/ui/replay_source.h"

#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QMetaObject>

namespace sp::ui {

ReplaySource::ReplaySource(QString path, QObject* parent) : TelemetrySource(parent), path_(std::move(path)) {
    registerUiMetaTypes();
}

ReplaySource::~ReplaySource() {
    stop();
}

template <typename Fn>
void ReplaySource::post(Fn&& fn) {
    // Runs on this object's (the GUI) thread; Qt drops it if the object is destroyed first.
    QMetaObject::invokeMethod(
        this,
        [this, fn = std::forward<Fn>(fn)]() mutable {
            if (!stopped_) fn();
        },
        Qt::QueuedConnection);
}

void ReplaySource::start() {
    if (started_) return;
    started_ = true;
    emit stateChanged(SourceState::loading, path_);
    worker_ = std::thread([this] { run(); });
}

void ReplaySource::stop() {
    stopped_ = true;
    stopping_ = true;
    cancel_ = true;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        room_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
}

void ReplaySource::cancel() {
    cancel_ = true;
}

void ReplaySource::waitForRoom() {
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [this] { return in_flight_ < kMaxBatchesInFlight || stopping_.load(); });
    ++in_flight_;
}

std::unique_ptr<sp::JsonlReader> ReplaySource::openReader(const std::shared_ptr<LoadReport>& report,
                                                          qint64 started_ns) {
    QElapsedTimer clock;
    clock.start();
    try {
        // A directory opens as a stream on Linux and fails only at the first read: say so plainly.
        if (QFileInfo(path_).isDir())
            throw std::runtime_error("cannot open telemetry file '" + path_.toStdString() +
                                     "': Is a directory");
        return std::make_unique<sp::JsonlReader>(QFile::encodeName(path_).toStdString());
    } catch (const std::exception& ex) {
        report->error = QString::fromStdString(ex.what());
        if (!report->error.contains(path_)) report->error = path_ + QStringLiteral(": ") + report->error;
        report->seconds = double(started_ns + clock.nsecsElapsed()) / 1e9;
        post([this, report] {
            emit loadFinished(*report);
            emit stateChanged(SourceState::failed, report->error);
        });
        return nullptr;
    }
}

void ReplaySource::postFinished(const sp::JsonlReader& reader, const std::shared_ptr<LoadReport>& report,
                                bool reached_end, qint64 total, double seconds) {
    report->records = reader.records_read();
    report->lines = reader.lines_read();
    report->bytes = reader.bytes_read();
    report->problems = reader.problems();
    report->problem_count = reader.problem_count();
    report->unknown_types = reader.unknown_type_count();
    report->cancelled = !reached_end && report->error.isEmpty();
    report->seconds = seconds;
    post([this, report, total] {
        emit progress(static_cast<qint64>(report->bytes), total);
        emit loadFinished(*report);
        QString summary = QStringLiteral("%1 records, %2 MB in %3 s")
                              .arg(report->records)
                              .arg(double(report->bytes) / 1e6, 0, 'f', 1)
                              .arg(report->seconds, 0, 'f', 2);
        if (report->cancelled) summary += QStringLiteral(" (cancelled)");
        if (report->problem_count > 0) summary += QStringLiteral(", %1 bad lines").arg(report->problem_count);
        emit stateChanged(SourceState::loaded, summary);
    });
}

void ReplaySource::run() {
    QElapsedTimer clock;
    clock.start();
    auto report = std::make_shared<LoadReport>();
    const qint64 total = QFileInfo(path_).size();

    const std::unique_ptr<sp::JsonlReader> reader = openReader(report, clock.nsecsElapsed());
    if (!reader) return;
    // Parsing is nearly all of a load; the GUI thread's share (appending to the store, painting) is
    // small, so a second core parses too.
    if (std::thread::hardware_concurrency() > 1) reader->parse_on_two_threads();

    auto batch = std::make_shared<std::vector<sp::TelemetryRecord>>();
    std::size_t weight = 0;
    bool first_update_sent = false;
    QElapsedTimer since;
    since.start();
    const auto flush = [&] {
        if (batch->empty()) return;
        waitForRoom();
        RecordBatch out = std::move(batch);
        batch = std::make_shared<std::vector<sp::TelemetryRecord>>();
        batch->reserve(kBatchRecords);
        weight = 0;
        since.restart();
        const qint64 done = static_cast<qint64>(reader->bytes_read());
        post([this, out, done, total] {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                --in_flight_;
                room_.notify_all();
            }
            emit recordsReceived(out);
            emit progress(done, total);
        });
    };

    bool reached_end = false;
    try {
        sp::TelemetryRecord rec;
        while (!cancel_.load(std::memory_order_relaxed)) {
            if (!reader->next(rec)) {
                reached_end = true;
                break;
            }
            if (const auto* header = std::get_if<sp::RunHeader>(&rec)) {
                // Keep the order: what came before the header, then the header.
                flush();
                post([this, h = *header] { emit headerReceived(h); });
                continue;
            }
            // The file's first update goes out alone, at once: the window has something to draw
            // while the rest loads (a big file's first full batch is tens of megabytes in).
            bool first_update = false;
            if (const auto* update = std::get_if<sp::UpdateRecord>(&rec)) {
                weight += update->block_details.size();
                first_update = !std::exchange(first_update_sent, true);
            }
            ++weight;
            batch->push_back(std::move(rec));
            if (first_update || batch->size() >= kBatchRecords || weight >= kBatchWeight ||
                since.elapsed() >= kBatchMillis)
                flush();
        }
        flush();
    } catch (const std::exception& ex) {
        // A read error mid-file: keep what was read and say what happened.
        report->error = path_ + QStringLiteral(": read error: ") + QString::fromStdString(ex.what());
        flush();
    }

    postFinished(*reader, report, reached_end, total, double(clock.nsecsElapsed()) / 1e9);
}

}  // namespace sp::ui
