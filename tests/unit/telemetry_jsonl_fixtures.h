#pragma once
// What the telemetry JSONL suites share (test_telemetry_jsonl, test_telemetry_jsonl_reading):
// exact double checks, an update record that sets every field, and the original tool's lines.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <variant>

#include "sp/jsonl.h"

namespace sp::test::telemetry_jsonl_fixtures {

// Exact equality for doubles (QCOMPARE on doubles is fuzzy); NaN equals NaN.
inline bool same(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    std::uint64_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
}

inline UpdateRecord sample_update() {
    UpdateRecord r;
    r.step_id = 1234567890123;
    r.timestamp = 1717171717.123456;
    r.blocks_bf16 = 1;
    r.blocks_int8 = 1;
    r.blocks_fp8 = 1;
    r.mean_sensitivity = 0.19999999999999998;
    r.max_sensitivity = 0.87;
    r.min_sensitivity = kNoValue;
    r.precision_changes = 2;
    r.estimated_bandwidth_saving_pct = 30.208333333333336;
    r.mode = Mode::static_;
    r.measured_bandwidth_saving_pct = 29.5;
    r.train_loss = 2.718281828459045;
    r.eval_loss = 3.0;
    r.eval_step = 0;  // measured before training, earlier than the record's step
    BlockDetail a;
    a.id = 0;
    a.precision = Precision::int8;
    a.sensitivity = 0.1 + 0.2;
    a.grad_score = 5e-324;
    a.error_score = 1.7976931348623157e308;
    a.relative_magnitude = -0.0;
    a.l2_norm = 2.0;
    a.max_abs = 1e21;
    a.variance = 3.4e-7;
    a.mean = kNoValue;
    a.forced = ForcedBy::config;
    a.changed = true;
    a.reason = Reason::config;
    a.window = 5;
    a.last_change_step = 40;
    a.switches = 3;
    BlockDetail b;  // all defaults: NaN window averages, reason hold, never changed
    b.id = 7;
    BlockDetail c;
    c.id = 12;
    c.precision = Precision::fp8_e5m2;
    c.forced = ForcedBy::pin;
    c.reason = Reason::pin;
    c.l2_norm = std::numeric_limits<double>::infinity();  // non-finite: written as null
    r.block_details = {a, b, c};
    return r;
}

inline UpdateRecord parse_update(const std::string& line) {
    TelemetryRecord rec;
    std::string error;
    const ParseStatus st = parse_record(line, rec, error);
    if (st != ParseStatus::ok) qWarning("parse failed: %s", error.c_str());
    if (st != ParseStatus::ok || !std::holds_alternative<UpdateRecord>(rec)) return UpdateRecord{};
    return std::get<UpdateRecord>(rec);
}

inline std::string minimal_line(const std::string& details = "{}") {
    return R"({"step_id": 50, "timestamp": 1234567.89, "blocks_bf16": 19, "blocks_int8": 29, )"
           R"("mean_sensitivity": 0.34, "max_sensitivity": 0.87, "min_sensitivity": 0.04, )"
           R"("precision_changes": 2, "estimated_bandwidth_saving_pct": 30.2, "block_details": )" +
           details + "}";
}

inline constexpr const char* kDetail0 =
    R"({"precision":"bf16","sensitivity":0.5,"grad_score":0.4,"error_score":0.1,"relative_magnitude":1,)"
    R"("l2_norm":null,"max_abs":null,"variance":null,"forced":null,"changed":false})";

}  // namespace sp::test::telemetry_jsonl_fixtures

#define CHECK_SAME(a, b)                                         \
    QVERIFY2(sp::test::telemetry_jsonl_fixtures::same((a), (b)), \
             qPrintable(QStringLiteral("%1 != %2").arg((a), 0, 'g', 17).arg((b), 0, 'g', 17)))
