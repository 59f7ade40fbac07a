#pragma once
// What the LiveSource suites share (test_live_source, test_live_source_commands): a recorder of
// everything a source emits, in order; quick timeouts; a source for a fake agent
// (tests/common/fake_agent.h); a pin command; and a join that waits until the source is live.
#include <QStringList>
#include <QtTest>

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "fake_agent.h"
#include "sp/ui/live_source.h"

namespace sp::test::live {

using namespace sp::ui;
using namespace std::chrono_literals;

// Everything a source emitted, in order, with the payloads a test checks.
struct Recorder {
    QStringList order;  // "header", "snapshot", "records", "lost", "reply", "bad", "state:<s>"
    std::vector<sp::RunHeader> headers;
    std::vector<sp::protocol::Snapshot> snapshots;
    std::vector<sp::UpdateRecord> updates;
    std::vector<sp::EventRecord> events;
    std::vector<quint64> lost;
    struct Reply {
        QString id;
        bool ok;
        QString error;
        qint64 step;
    };
    std::vector<Reply> replies;
    QStringList bad;
    std::vector<SourceState> states;
    QStringList state_details;  // beside states, the detail each change came with

    explicit Recorder(TelemetrySource& s) {
        QObject::connect(&s, &TelemetrySource::headerReceived, [this](const sp::RunHeader& h) {
            order << "header";
            headers.push_back(h);
        });
        QObject::connect(&s, &TelemetrySource::snapshotReceived, [this](const sp::protocol::Snapshot& snap) {
            order << "snapshot";
            snapshots.push_back(snap);
        });
        QObject::connect(&s, &TelemetrySource::recordsReceived, [this](const RecordBatch& batch) {
            order << "records";
            for (const sp::TelemetryRecord& r : *batch) {
                if (auto* u = std::get_if<sp::UpdateRecord>(&r)) updates.push_back(*u);
                if (auto* e = std::get_if<sp::EventRecord>(&r)) events.push_back(*e);
            }
        });
        QObject::connect(&s, &TelemetrySource::messagesLost, [this](quint64 n) {
            order << "lost";
            lost.push_back(n);
        });
        QObject::connect(&s, &TelemetrySource::commandReplied,
                         [this](const QString& id, bool ok, const QString& error, qint64 step) {
                             order << "reply";
                             replies.push_back({id, ok, error, step});
                         });
        QObject::connect(&s, &TelemetrySource::badMessage, [this](const QString& why) {
            order << "bad";
            bad << why;
        });
        QObject::connect(&s, &TelemetrySource::stateChanged, [this](SourceState st, const QString& detail) {
            order << "state:" + toString(st);
            states.push_back(st);
            state_details << detail;
        });
    }

    std::vector<std::int64_t> steps() const {
        std::vector<std::int64_t> out;
        for (const auto& u : updates) out.push_back(u.step_id);
        return out;
    }
    const Reply* replyTo(const QString& id) const {
        for (const Reply& r : replies)
            if (r.id == id) return &r;
        return nullptr;
    }
};

inline LiveOptions fastOptions() {
    LiveOptions o;
    o.stale_timeout = 400ms;
    o.disconnect_timeout = 1200ms;
    o.command_timeout = 2000ms;
    return o;
}

// A source following `agent`: a FakeAgent or a ServedAgent (anything with spec()).
template <typename Agent>
std::unique_ptr<LiveSource> makeSource(const Agent& agent, LiveOptions options = fastOptions()) {
    QString error;
    auto endpoints = parseEndpointSpec(QString::fromStdString(agent.spec()), &error);
    if (!endpoints) qFatal("bad spec: %s", qPrintable(error));
    return std::make_unique<LiveSource>(*endpoints, options);
}

inline sp::Command pin(std::vector<int> blocks, sp::Precision p) {
    sp::Command c;
    c.kind = sp::Command::Kind::pin;
    c.blocks = std::move(blocks);
    c.precision = p;
    return c;
}

// A source that has joined: live and synchronised with the agent.
inline void join(LiveSource& source, Recorder& rec) {
    source.start();
    QTRY_VERIFY_WITH_TIMEOUT(!rec.snapshots.empty(), 10000);
    QTRY_VERIFY_WITH_TIMEOUT(!rec.states.empty() && rec.states.back() == SourceState::live, 10000);
}

}  // namespace sp::test::live
