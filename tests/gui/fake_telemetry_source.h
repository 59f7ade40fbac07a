#pragma once
// An in-test TelemetrySource that emits exactly what a test tells it to (no sockets, no
// threads), and records the commands a session sends. Header-only; used by the model tests.
#include <utility>
#include <vector>

#include "sp/jsonl.h"
#include "sp/ui/telemetry_source.h"

namespace sp::test {

// Small record builders for the tests.
inline sp::BlockDetail blockDetail(int id, sp::Precision p, double sensitivity,
                                   sp::ForcedBy forced = sp::ForcedBy::none, bool changed = false) {
    sp::BlockDetail d;
    d.id = id;
    d.precision = p;
    d.sensitivity = sensitivity;
    d.grad_score = sensitivity / 2;
    d.error_score = sensitivity / 4;
    d.relative_magnitude = 1.0 + id;
    d.l2_norm = 0.5 * id;
    d.max_abs = 0.01;
    d.forced = forced;
    d.changed = changed;
    d.reason = forced == sp::ForcedBy::pin ? sp::Reason::pin : sp::Reason::policy;
    return d;
}

inline sp::UpdateRecord updateRecord(std::int64_t step, std::vector<sp::BlockDetail> details) {
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1.7e9 + double(step);
    for (const auto& d : details) {
        (d.precision == sp::Precision::bf16 ? r.blocks_bf16 : r.blocks_int8) += 1;
        r.precision_changes += d.changed ? 1 : 0;
    }
    r.block_details = std::move(details);
    return r;
}

// `count` blocks with every block at `p` and sensitivity 0.1 * (id + 1).
inline sp::UpdateRecord uniformUpdate(std::int64_t step, int count, sp::Precision p = sp::Precision::bf16) {
    std::vector<sp::BlockDetail> details;
    details.reserve(std::size_t(count));
    for (int i = 0; i < count; ++i) details.push_back(blockDetail(i, p, 0.1 * (i + 1)));
    return updateRecord(step, std::move(details));
}

inline sp::RunHeader runHeader(const std::string& run_id, int blocks) {
    sp::RunHeader h;
    h.run_id = run_id;
    h.producer = "test";
    h.blocks = sp::uniform_layout(blocks, 1024);
    return h;
}

// The event as a telemetry source delivers it: its payload read from the JSON text `payload`.
inline sp::EventRecord eventRecord(const std::string& kind, std::int64_t step, const std::string& payload) {
    return sp::event_from_json_text(kind, step, 1.7e9 + double(step), payload);
}

class FakeTelemetrySource : public sp::ui::TelemetrySource {
    Q_OBJECT
  public:
    explicit FakeTelemetrySource(bool live = true) : live_(live) {}

    QString label() const override { return QStringLiteral("fake://agent"); }
    bool isLive() const override { return live_; }
    void start() override { started = true; }
    void stop() override { started = false; }
    bool sendCommand(const QString& request_id, const sp::Command& command) override {
        if (!connected) return false;
        sent.emplace_back(request_id, command);
        return true;
    }

    // Test drivers: emit as a real source would, on this (the test's) thread.
    void header(const sp::RunHeader& h) { emit headerReceived(h); }
    void snapshot(const sp::protocol::Snapshot& s) { emit snapshotReceived(s); }
    void records(std::vector<sp::TelemetryRecord> recs) {
        emit recordsReceived(std::make_shared<const std::vector<sp::TelemetryRecord>>(std::move(recs)));
    }
    void state(sp::ui::SourceState s, const QString& detail = {}) { emit stateChanged(s, detail); }
    void lost(quint64 n) { emit messagesLost(n); }
    void reply(const QString& id, bool ok, const QString& error, qint64 step) {
        emit commandReplied(id, ok, error, step);
    }

    bool started = false;
    bool connected = true;
    std::vector<std::pair<QString, sp::Command>> sent;

  private:
    bool live_;
};

}  // namespace sp::test
