#pragma once
// A run for ChartsPanel's tests, written straight into a store: update u at step 4u, known savings,
// counts, losses (eval every tenth update) and per-block values (test_charts, test_chart_interaction).
#include <QAbstractSeries>
#include <QChart>

#include "sp/telemetry.h"
#include "sp/ui/telemetry_store.h"

namespace sp::test {

using sp::ui::TelemetryStore;

constexpr int kBlocks = 5;

struct Options {
    bool measured = true;
    bool loss = true;
};

inline sp::UpdateRecord makeRecord(std::size_t u, Options o) {
    sp::UpdateRecord r;
    r.step_id = std::int64_t(u) * 4;
    r.timestamp = 50.0 + double(u);
    r.estimated_bandwidth_saving_pct = 10.0 + double(u % 17);
    if (o.measured) r.measured_bandwidth_saving_pct = 5.0 + double(u % 11);
    r.blocks_int8 = int(u % 3);
    r.blocks_fp8 = int(u % 2);
    r.blocks_bf16 = kBlocks - r.blocks_int8 - r.blocks_fp8;
    if (o.loss) {
        r.train_loss = 3.0 - double(u) * 0.001;
        if (u % 10 == 0) r.eval_loss = 3.2 - double(u) * 0.001;  // sparse
    }
    for (int b = 0; b < kBlocks; ++b) {
        sp::BlockDetail d;
        d.id = b;
        d.sensitivity = double((b * 13 + int(u) * 7) % 50) / 49.0;
        d.l2_norm = 0.5 + double(b) + double(u % 5) * 0.25;
        r.block_details.push_back(d);
    }
    return r;
}

inline void fill(TelemetryStore& store, std::size_t n, Options o = {}) {
    store.reset(sp::uniform_layout(kBlocks));
    store.reserve(n);
    for (std::size_t u = 0; u < n; ++u) store.append(makeRecord(u, o));
}

// The series of a chart named `name` (the first segment of a line), or null.
inline QAbstractSeries* seriesNamed(QChart* chart, const QString& name) {
    for (QAbstractSeries* s : chart->series())
        if (s->name() == name) return s;
    return nullptr;
}

}  // namespace sp::test
