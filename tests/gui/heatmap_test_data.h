#pragma once
// What the heatmap suites (test_heatmap, test_heatmap_marks) share: records with known
// sensitivities, precisions and pins, mouse and pixel helpers, and a base fixture that shows a
// HeatmapView over a store filled directly.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <QMouseEvent>

#include "fake_telemetry_source.h"
#include "sp/ui/colormap.h"
#include "sp/ui/half_float.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui::heatmap_test {

using sp::test::eventRecord;
using sp::test::FakeTelemetrySource;

constexpr int kBlocks = 4;

// Known sensitivity per (block, update); block 2 has no detail at update 3 (a missing cell). Values
// the store keeps exactly (fp16), so the expected colours are the drawn ones.
inline float sensitivityOf(int block, std::size_t update) {
    return sp::ui::fromHalf(sp::ui::toHalf(float((block * 7 + int(update) * 3) % 20) / 19.0f));
}
inline bool presentAt(int block, std::size_t update) {
    return !(block == 2 && update == 3);
}

inline sp::UpdateRecord makeRecord(std::size_t update, int blocks = kBlocks, bool details = true) {
    sp::UpdateRecord r;
    r.step_id = std::int64_t(update) * 10 + 100;
    r.timestamp = 1000.0 + double(update);
    r.estimated_bandwidth_saving_pct = 12.5;
    if (!details) return r;
    for (int b = 0; b < blocks; ++b) {
        if (!presentAt(b, update)) continue;
        sp::BlockDetail d;
        d.id = b;
        d.sensitivity = sensitivityOf(b, update);
        d.precision = b == 1 ? sp::Precision::int8 : (b == 3 ? sp::Precision::fp8_e4m3 : sp::Precision::bf16);
        d.forced = b == 1 ? sp::ForcedBy::pin : (b == 0 ? sp::ForcedBy::config : sp::ForcedBy::none);
        d.reason = b == 1 ? sp::Reason::pin : sp::Reason::policy;
        d.grad_score = 0.25;
        d.error_score = 0.125;
        d.relative_magnitude = 0.5;
        d.l2_norm = 3.5;
        d.max_abs = 0.75;
        r.block_details.push_back(d);
    }
    return r;
}

inline void fill(TelemetryStore& store, std::size_t from, std::size_t to, int blocks = kBlocks) {
    for (std::size_t u = from; u < to; ++u) store.append(makeRecord(u, blocks));
}

inline QRgb expectedColor(int block, std::size_t update) {
    return presentAt(block, update) ? sensitivityColor(sensitivityOf(block, update)) : kMissingColor;
}

inline void sendMouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button,
                      Qt::MouseButtons buttons, Qt::KeyboardModifiers mods = Qt::NoModifier) {
    QMouseEvent event(type, QPointF(pos), w->mapToGlobal(QPointF(pos)), button, buttons, mods);
    QCoreApplication::sendEvent(w, &event);
}

inline std::vector<int> lastSelection(const QSignalSpy& spy) {
    return spy.last().at(0).value<std::vector<int>>();
}

// A record of `blocks` blocks whose details `shape(b, d)` fills (it returns false to leave the block
// out of this update: a missing cell).
template <typename Shape>
inline sp::UpdateRecord shapedRecord(std::size_t update, int blocks, Shape shape) {
    sp::UpdateRecord r = makeRecord(update, 0, false);
    for (int b = 0; b < blocks; ++b) {
        sp::BlockDetail d;
        d.id = b;
        d.sensitivity = 0.1;
        if (shape(b, d)) r.block_details.push_back(d);
    }
    return r;
}

// Varied sensitivities for the pooled grid's checks: missing cells, NaN, 0, negative, above 1.
inline bool variedDetail(int b, std::size_t u, sp::BlockDetail& d) {
    const auto h = (std::uint32_t(b) * 2654435761u) ^ (std::uint32_t(u) * 40503u + 12345u);
    const std::uint32_t k = (h >> 7) % 100;
    if (k < 4 || (b == 7 && u < 300)) return false;  // block 7 arrives late
    if (k < 7) {
        d.sensitivity = std::nan("");
    } else if (k < 10) {
        d.sensitivity = 0.0;
    } else if (k < 12) {
        d.sensitivity = -0.5;
    } else if (k < 14) {
        d.sensitivity = 1.5;
    } else {
        d.sensitivity = double((h >> 3) % 1000) / 999.0;
    }
    return true;
}

inline bool sameRgb(QRgb a, QRgb b) {
    return (a & 0xFFFFFF) == (b & 0xFFFFFF);
}

inline QImage grabOf(HeatmapView& view) {
    return view.viewport()->grab().toImage().convertToFormat(QImage::Format_RGB32);
}

// Applies `command` (the agent's command event with `request_id`): the session's pending entry ends.
inline void applyCommand(FakeTelemetrySource& source, const QString& request_id, const QString& command) {
    const QString payload =
        QStringLiteral(R"({"command":%1,"ok":true,"changes":1,"id":"%2"})").arg(command, request_id);
    source.records({eventRecord("command", 11, payload.toStdString())});
}

class HeatmapFixture : public QObject {
  protected:
    TelemetryStore store_;
    std::unique_ptr<HeatmapView> view_;

    void makeView(std::size_t updates, QSize size = QSize(640, 360)) {
        store_.reset(sp::uniform_layout(kBlocks));
        fill(store_, 0, updates);
        view_ = std::make_unique<HeatmapView>();
        view_->resize(size);
        view_->setStore(&store_);
        view_->show();
        QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
        view_->refresh();
    }
};

}  // namespace sp::ui::heatmap_test
