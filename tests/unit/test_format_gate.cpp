// The "never slower than BF16" gate: rules derived from measurements (the seed tool's pitfall fixed),
// admits / admits_block, and the policy file (round trip, every rejection with its key).
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/fifo_read.h"
#include "../common/problems.h"
#include "sp/format_gate.h"

using sp::FormatGatePolicy;
using sp::GateMeasurement;
using sp::GateRule;
using sp::LayerKind;
using sp::Precision;

namespace {

using sp::test::has_problem;
using sp::test::joined;

// One measurement per (rows, speed-up): BF16 takes 1 s, the format 1/speed-up s.
std::vector<GateMeasurement> sweep(Precision format, std::uint64_t cols,
                                   const std::vector<std::pair<std::uint64_t, double>>& rows_speedup,
                                   LayerKind kind = LayerKind::matrix) {
    std::vector<GateMeasurement> out;
    out.reserve(rows_speedup.size());
    for (const auto& [rows, speedup] : rows_speedup)
        out.push_back({kind, rows, cols, format, 1.0 / speedup, 1.0});
    return out;
}

std::vector<std::string> problems_of(const std::string& text) {
    try {
        sp::parse_gate_policy(text);
    } catch (const sp::ConfigError& e) {
        return e.problems();
    }
    return {};
}

#define EXPECT_PROBLEM(text, ...)                                                    \
    do {                                                                             \
        const auto ps_ = problems_of(text);                                          \
        QVERIFY2(has_problem(ps_, {__VA_ARGS__}), ("got:\n" + joined(ps_)).c_str()); \
    } while (false)

// A small valid file the rejection tests break one key at a time.
nlohmann::json valid_file() {
    return nlohmann::json::parse(R"({
      "version": 1, "producer": "test", "device": "cpu", "link": "memcpy", "speedup_threshold": 1.0,
      "int4_group": 64,
      "rules": {"matrix": {"128": [{"format": "int8", "min_rows": 512, "measured_speedup": 1.31,
                                    "min_speedup": 1.2, "max_rows": 65536}]},
                "vector": {}}})");
}

}  // namespace

class TestFormatGate : public QObject {
    Q_OBJECT

  private slots:
    void no_rule_means_bf16_only() {
        const FormatGatePolicy empty;
        for (Precision p : sp::kAllPrecisions)
            QCOMPARE(empty.admits(p, LayerKind::matrix, 1u << 20, 4096), p == Precision::bf16);

        // A rule for int8 at 128 columns says nothing about other formats, widths or kinds.
        const FormatGatePolicy policy = sp::derive_gate_policy(sweep(Precision::int8, 128, {{64, 2.0}}), 1.0);
        QVERIFY(policy.admits(Precision::int8, LayerKind::matrix, 64, 128));
        QVERIFY(!policy.admits(Precision::int4, LayerKind::matrix, 64, 128));
        QVERIFY(!policy.admits(Precision::int8, LayerKind::matrix, 64, 256));
        QVERIFY(!policy.admits(Precision::int8, LayerKind::vector, 64, 128));
        QVERIFY(!policy.admits(Precision::int8, LayerKind::matrix, 63, 128));  // below min_rows
    }

    void rule_starts_where_the_format_stays_faster() {
        // Faster from 64 on: the rule starts at 64 with the speed-up measured there.
        const auto policy = sp::derive_gate_policy(
            sweep(Precision::int8, 128, {{16, 0.5}, {32, 0.9}, {64, 1.2}, {128, 1.5}}), 1.0);
        QCOMPARE(policy.rules.size(), std::size_t(1));
        const GateRule& r = policy.rules[0];
        QCOMPARE(r.min_rows, std::uint64_t(64));
        QCOMPARE(r.measured_speedup, 1.2);
        QCOMPARE(r.min_speedup, 1.2);
        QCOMPARE(r.max_rows, std::uint64_t(128));
    }

    void speedup_that_dips_starts_the_rule_above_the_dip() {
        // The seed tool's pitfall: fast at 32, slow again at 128. The rule must start at 256.
        const auto policy = sp::derive_gate_policy(
            sweep(Precision::fp8_e4m3, 512,
                  {{16, 0.8}, {32, 1.4}, {64, 1.3}, {128, 0.95}, {256, 1.1}, {512, 1.6}}),
            1.0);
        QCOMPARE(policy.rules.size(), std::size_t(1));
        QCOMPARE(policy.rules[0].min_rows, std::uint64_t(256));
        QCOMPARE(policy.rules[0].measured_speedup, 1.1);
        QVERIFY(!policy.admits(Precision::fp8_e4m3, LayerKind::matrix, 64, 512));
        QVERIFY(policy.admits(Precision::fp8_e4m3, LayerKind::matrix, 256, 512));
    }

    void slow_at_the_largest_size_means_no_rule() {
        const auto policy = sp::derive_gate_policy(
            sweep(Precision::int4, 128, {{16, 1.5}, {32, 1.4}, {64, 1.2}, {128, 0.99}}), 1.0);
        QVERIFY(policy.rules.empty());
        QVERIFY(!policy.admits(Precision::int4, LayerKind::matrix, 32, 128));
    }

    void exact_threshold_counts() {
        // 2/2 is exactly 1.0 and 3/2 exactly 1.5: ">= threshold" must admit both.
        std::vector<GateMeasurement> m = {{LayerKind::matrix, 16, 64, Precision::int8, 2.0, 2.0},
                                          {LayerKind::matrix, 16, 64, Precision::int4, 2.0, 3.0},
                                          {LayerKind::matrix, 32, 64, Precision::int4, 2.0, 2.0}};
        const auto at_one = sp::derive_gate_policy(m, 1.0);
        QCOMPARE(at_one.rules.size(), std::size_t(2));
        QCOMPARE(at_one.find(LayerKind::matrix, 64, Precision::int8)->measured_speedup, 1.0);
        QCOMPARE(at_one.find(LayerKind::matrix, 64, Precision::int4)->min_rows, std::uint64_t(16));
        const auto at_one_and_half = sp::derive_gate_policy(m, 1.5);
        QVERIFY(at_one_and_half.rules.empty());  // int4 at 32 is 1.0 < 1.5
        // Just below the threshold is not enough.
        const auto below = sp::derive_gate_policy(
            {{LayerKind::matrix, 16, 64, Precision::int8, 1.0, std::nextafter(1.0, 0.0)}}, 1.0);
        QVERIFY(below.rules.empty());
    }

    void slowest_repeat_of_a_size_counts() {
        auto m = sweep(Precision::int8, 128, {{16, 1.5}, {32, 1.5}});
        m.push_back({LayerKind::matrix, 32, 128, Precision::int8, 1.0, 0.9});  // 32 again, slow
        QVERIFY(sp::derive_gate_policy(m, 1.0).rules.empty());
    }

    void broken_measurements_never_admit() {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        std::vector<GateMeasurement> m = sweep(Precision::int8, 128, {{16, 2.0}});
        m.push_back({LayerKind::matrix, 32, 128, Precision::int8, nan, 1.0});
        m.push_back({LayerKind::matrix, 64, 128, Precision::int4, 0.0, 1.0});
        m.push_back({LayerKind::matrix, 64, 128, Precision::fp8_e5m2, 1.0, -1.0});
        QVERIFY(sp::derive_gate_policy(m, 1.0).rules.empty());
    }

    void bf16_measurements_and_bad_thresholds() {
        QVERIFY(sp::derive_gate_policy(sweep(Precision::bf16, 128, {{16, 2.0}}), 1.0).rules.empty());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::derive_gate_policy({}, 0.0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::derive_gate_policy({}, std::numeric_limits<double>::quiet_NaN()));
    }

    void speedups_round_down_for_the_file() {
        const auto p =
            sp::derive_gate_policy(sweep(Precision::int8, 128, {{16, 1.23456}, {32, 1.0004}}), 1.0);
        QCOMPARE(p.rules.size(), std::size_t(1));
        QCOMPARE(p.rules[0].measured_speedup, 1.234);
        QCOMPARE(p.rules[0].min_speedup, 1.0);
        // Rounding never drops a passing speed-up below the threshold it passed.
        const auto q = sp::derive_gate_policy(sweep(Precision::int8, 128, {{16, 1.05059}}), 1.0505);
        QCOMPARE(q.rules[0].measured_speedup, 1.0505);
    }

    void kind_follows_from_rows() {
        QVERIFY(sp::kind_of({1, 4096}) == LayerKind::vector);
        QVERIFY(sp::kind_of({}) == LayerKind::vector);
        QVERIFY(sp::kind_of({2, 4096}) == LayerKind::matrix);
    }

    void block_needs_every_matrix_admitted() {
        auto m = sweep(Precision::int8, 128, {{128, 1.5}, {512, 1.5}});
        const auto more = sweep(Precision::int8, 512, {{128, 1.5}});
        m.insert(m.end(), more.begin(), more.end());
        const FormatGatePolicy p = sp::derive_gate_policy(m, 1.0);
        // Vectors (a norm of 128, a bias of 384) follow the block: no vector rule is needed.
        QVERIFY(sp::admits_block(p, Precision::int8,
                                 {{384, 128}, {128, 128}, {512, 128}, {128, 512}, {1, 128}, {1, 384}}));
        // A matrix of 64 rows is below min_rows (128).
        QVERIFY(!sp::admits_block(p, Precision::int8, {{384, 128}, {64, 128}}));
        // A matrix whose width has no rule (cols 256) keeps the block in BF16.
        QVERIFY(!sp::admits_block(p, Precision::int8, {{384, 128}, {384, 256}}));
        // Another format has no rule at all.
        QVERIFY(!sp::admits_block(p, Precision::int4, {{384, 128}}));
        // A block of vectors only, or of nothing, gets BF16 only.
        QVERIFY(!sp::admits_block(p, Precision::int8, {{1, 128}}));
        QVERIFY(!sp::admits_block(p, Precision::int8, {}));
        QVERIFY(sp::admits_block(p, Precision::bf16, {}));
        QVERIFY(sp::admits_block(p, Precision::bf16, {{384, 256}}));
    }

    void round_trip() {
        std::vector<GateMeasurement> m = sweep(Precision::int8, 1024, {{16, 1.1}, {32, 1.7}});
        for (const auto& more : {sweep(Precision::int4, 128, {{512, 1.31}, {1024, 2.5}}),
                                 sweep(Precision::fp8_e5m2, 128, {{64, 1.01}}),
                                 sweep(Precision::int8, 384, {{1, 1.2}}, LayerKind::vector)})
            m.insert(m.end(), more.begin(), more.end());
        FormatGatePolicy p = sp::derive_gate_policy(m, 1.0);
        p.producer = "sp-ctl gate 0.1.0";
        p.device = "cpu";
        p.link = "memcpy";
        p.int4_group = 32;
        QCOMPARE(p.rules.size(), std::size_t(4));
        const std::string text = sp::to_json_text(p);
        QVERIFY(sp::parse_gate_policy(text) == p);
        QCOMPARE(sp::to_json_text(sp::parse_gate_policy(text)), text);  // stable
        // Sizes in numeric order (128 before 1024), matrix before vector.
        QVERIFY(text.find("\"128\"") < text.find("\"1024\""));
        QVERIFY(text.find("\"matrix\"") < text.find("\"vector\""));
        // An empty policy too.
        QVERIFY(sp::parse_gate_policy(sp::to_json_text(FormatGatePolicy{})) == FormatGatePolicy{});
    }

    void optional_keys_have_defaults() {
        const auto p = sp::parse_gate_policy(
            R"({"version": 1, "rules": {"matrix": {"64": [{"format": "fp8_e4m3", "min_rows": 8, "measured_speedup": 2}]}}})");
        QCOMPARE(p.speedup_threshold, 1.0);
        QCOMPARE(p.int4_group, std::uint64_t(64));
        QCOMPARE(p.rules.size(), std::size_t(1));
        QCOMPARE(p.rules[0].min_speedup, 2.0);
        QCOMPARE(p.rules[0].max_rows, std::uint64_t(8));
        QVERIFY(p.admits(Precision::fp8_e4m3, LayerKind::matrix, 8, 64));
    }

    void bad_files_name_the_key() {
        auto with = [](const char* pointer, nlohmann::json value) {
            nlohmann::json j = valid_file();
            j[nlohmann::json::json_pointer(pointer)] = std::move(value);
            return j.dump();
        };
        const char* rule = "/rules/matrix/128/0";
        QVERIFY(problems_of(valid_file().dump()).empty());
        EXPECT_PROBLEM("[1]", "must be a JSON object");
        EXPECT_PROBLEM("{", "not valid JSON: column 2");
        EXPECT_PROBLEM(R"({"speedup_threshold": 1e309})", "key 'speedup_threshold'",
                       "beyond the range of a double");
        EXPECT_PROBLEM(with("/version", 2), "'version'", "must be 1");
        EXPECT_PROBLEM(with("/device", 3), "'device'", "must be a string");
        EXPECT_PROBLEM(with("/speedup_threshold", -1), "'speedup_threshold'", "> 0", "-1");
        EXPECT_PROBLEM(with("/int4_group", 0), "'int4_group'", ">= 1");
        EXPECT_PROBLEM(with("/extra", 1), "'extra'", "unknown key");
        EXPECT_PROBLEM(with("/rules/tensor", nlohmann::json::object()), "'rules.tensor'", "unknown key");
        EXPECT_PROBLEM(with("/rules/matrix", 5), "'rules.matrix'", "must be an object");
        EXPECT_PROBLEM(with("/rules/matrix/-128", nlohmann::json::array()), "'rules.matrix.-128'",
                       "column count");
        EXPECT_PROBLEM(with("/rules/matrix/0", nlohmann::json::array()), "'rules.matrix.0'", "column count");
        EXPECT_PROBLEM(with("/rules/matrix/128", 7), "'rules.matrix.128'", "must be an array");
        EXPECT_PROBLEM(with(rule, 7), "'rules.matrix.128[0]'", "must be an object");
        EXPECT_PROBLEM(with((std::string(rule) + "/format").c_str(), "int9"), "'rules.matrix.128[0].format'",
                       "int9");
        EXPECT_PROBLEM(with((std::string(rule) + "/format").c_str(), "bf16"), "[0].format'",
                       "always admitted");
        EXPECT_PROBLEM(with((std::string(rule) + "/min_rows").c_str(), -512), "[0].min_rows'", ">= 1",
                       "-512");
        EXPECT_PROBLEM(with((std::string(rule) + "/min_rows").c_str(), 1.5), "[0].min_rows'", ">= 1");
        EXPECT_PROBLEM(with((std::string(rule) + "/min_rows").c_str(), "512"), "[0].min_rows'", "\"512\"");
        EXPECT_PROBLEM(with((std::string(rule) + "/measured_speedup").c_str(), 0.9), "[0].measured_speedup'",
                       "speedup_threshold");
        EXPECT_PROBLEM(with((std::string(rule) + "/min_speedup").c_str(), 1.5), "[0].min_speedup'",
                       "<= measured_speedup");
        EXPECT_PROBLEM(with((std::string(rule) + "/max_rows").c_str(), 256), "[0].max_rows'", ">= min_rows");
        EXPECT_PROBLEM(with((std::string(rule) + "/colour").c_str(), 1), "[0].colour'", "unknown key");
        EXPECT_PROBLEM(with("/rules/matrix/128/1", valid_file()["rules"]["matrix"]["128"][0]), "[1].format'",
                       "a second rule");
        nlohmann::json missing = valid_file();
        missing["rules"]["matrix"]["128"][0].erase("min_rows");
        missing.erase("version");
        EXPECT_PROBLEM(missing.dump(), "'rules.matrix.128[0].min_rows'", "missing");
        EXPECT_PROBLEM(missing.dump(), "'version'", "missing");  // every problem at once
        missing.erase("rules");
        EXPECT_PROBLEM(missing.dump(), "'rules'", "missing");
        // The message names the file kind, not the training config.
        try {
            sp::parse_gate_policy("[]");
            QFAIL("accepted");
        } catch (const sp::ConfigError& e) {
            QVERIFY(std::string(e.what()).find("format gate policy") != std::string::npos);
        }
    }

    void load_adds_the_path() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("gate.json").toStdString();
        {
            nlohmann::json j = valid_file();
            j["version"] = 7;
            std::ofstream(path) << j.dump();
        }
        try {
            sp::load_gate_policy(path);
            QFAIL("accepted");
        } catch (const sp::ConfigError& e) {
            QVERIFY(has_problem(e.problems(), {path + ": key 'version'"}));
        }
        QVERIFY_THROWS_EXCEPTION(sp::GatePolicyError,
                                 sp::load_gate_policy(dir.filePath("none.json").toStdString()));
        QVERIFY_THROWS_EXCEPTION(sp::GatePolicyError, sp::load_gate_policy(dir.path().toStdString()));
        std::ofstream(path) << valid_file().dump();
        QCOMPARE(sp::load_gate_policy(path).rules.size(), std::size_t(1));
    }

    // Only a regular file of at most 16 MiB is read: a FIFO used to block the reader until a writer
    // came, and /dev/zero to grow it without end (not tried here: before the fix it would).
    void load_refuses_a_fifo_a_device_and_a_file_over_16_mib() {
        QTemporaryDir dir;
        const std::string fifo = dir.filePath("gate.fifo").toStdString();
        QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
        const auto read = sp::test::read_fifo_without_writer(fifo, [&] { sp::load_gate_policy(fifo); });
        QVERIFY2(!read.blocked, "load_gate_policy waited for a writer of the FIFO");
        const auto refusal = [](const std::string& path, const std::string& why) {
            return "invalid format gate policy:\n  " + path + ": cannot read the file (" + why + ")";
        };
        QCOMPARE(QString::fromStdString(read.refusal),
                 QString::fromStdString(refusal(fifo, "not a regular file: a FIFO")));
        const std::string big = dir.filePath("big.json").toStdString();
        {
            QFile f(QString::fromStdString(big));
            QVERIFY(f.open(QIODevice::WriteOnly) && f.resize((qint64(16) << 20) + 1));  // sparse
        }
        for (const auto& [path, why] :
             {std::pair<std::string, std::string>{"/dev/null", "not a regular file: a character device"},
              {big, "larger than 16 MiB (the limit for a JSON document)"}}) {
            try {
                sp::load_gate_policy(path);
                QFAIL(qPrintable(QString::fromStdString(path + " accepted")));
            } catch (const sp::GatePolicyError& e) {
                QCOMPARE(QString::fromUtf8(e.what()), QString::fromStdString(refusal(path, why)));
            }
        }
    }

    // A second "128" under rules.matrix used to replace the first without a word.
    void duplicate_keys_are_refused_naming_the_key() {
        const std::string text =
            R"({"version": 1, "rules": {"matrix": {)"
            R"("128": [{"format": "int8", "min_rows": 512, "measured_speedup": 1.3}],)"
            "\n"
            R"( "128": [{"format": "int4", "min_rows": 64, "measured_speedup": 1.9}]}}})";
        const auto ps = problems_of(text);
        QCOMPARE(ps.size(), std::size_t(1));
        QCOMPARE(
            QString::fromStdString(ps[0]),
            QString("key 'rules.matrix.128': given more than once in the same object (line 2, column 2); "
                    "give each key once"));
        EXPECT_PROBLEM(R"({"version": 1, "version": 1, "rules": {}})", "key 'version'", "more than once");
    }
};

QTEST_APPLESS_MAIN(TestFormatGate)
#include "test_format_gate.moc"
