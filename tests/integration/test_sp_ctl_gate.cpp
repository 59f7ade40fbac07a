// `sp-ctl gate` end to end on small sizes: the table's structure, the policy file's consistency with
// the table, and the usage errors. Speeds are never asserted (machines are noisy); only that the
// file says what the table shows.
#include <QtTest>

#include <QTemporaryDir>

#include <cmath>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "run_process.h"
#include "sp/format_gate.h"

namespace {

using sp::test::Run;
using sp::test::sp_ctl;

struct Row {
    std::string kind;
    std::uint64_t cols = 0, rows = 0;
    std::string format;
    double us = 0, bf16_us = 0, speedup = 0;
};

// The table: the lines after the header, up to the first empty line.
std::vector<Row> table_of(const QByteArray& out) {
    std::istringstream in(out.toStdString());
    std::string line;
    std::getline(in, line);  // header
    std::vector<Row> rows;
    while (std::getline(in, line) && !line.empty()) {
        std::istringstream fields(line);
        Row r;
        fields >> r.kind >> r.cols >> r.rows >> r.format >> r.us >> r.bf16_us >> r.speedup;
        if (fields.fail()) qFatal("bad table line: %s", line.c_str());
        rows.push_back(r);
    }
    return rows;
}

// Printed speed-ups have 4 decimals: closer than this to the threshold, the table cannot tell.
constexpr double kPrintTolerance = 1e-4;

}  // namespace

class TestSpCtlGate : public QObject {
    Q_OBJECT

  private slots:
    void writes_a_policy_that_matches_the_table() {
        QTemporaryDir dir;
        const QString path = dir.filePath("gate.json");
        const Run r =
            sp_ctl({"gate", "--shapes", "48x32,32", "--out", path, "--formats", "int8,int4,fp8_e5m2",
                    "--min-rows", "16", "--max-rows", "64", "--repeats", "3", "--int4-group", "16"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::vector<Row> table = table_of(r.out);

        // Every size of the sweep, each with every format: matrix 32 at 16, 32, 48 (its own), 64;
        // the vector of 32 at its own size.
        std::map<std::tuple<std::string, std::uint64_t, std::string>, std::map<std::uint64_t, double>>
            speedups;
        for (const Row& row : table) {
            QVERIFY(row.us > 0 && row.bf16_us > 0);
            // The printed speed-up is the ratio of the printed times, up to their rounding (4 decimals).
            const double slack = row.speedup * (0.5e-4 / row.us + 0.5e-4 / row.bf16_us) + 1e-4;
            QVERIFY(std::abs(row.speedup - row.bf16_us / row.us) <= slack);
            speedups[{row.kind, row.cols, row.format}][row.rows] = row.speedup;
        }
        QCOMPARE(table.size(), std::size_t(3 * (4 + 1)));
        for (const char* f : {"int8", "int4", "fp8_e5m2"}) {
            const auto& m = speedups[{"matrix", 32, f}];
            QCOMPARE(m.size(), std::size_t(4));
            QVERIFY(m.count(16) && m.count(32) && m.count(48) && m.count(64));
            const auto& v = speedups[{"vector", 32, f}];
            QCOMPARE(v.size(), std::size_t(1));
            QVERIFY(v.count(1));
        }

        const sp::FormatGatePolicy policy = sp::load_gate_policy(path.toStdString());
        QVERIFY(policy.producer.rfind("sp-ctl gate ", 0) == 0);
        QVERIFY(policy.device.rfind("cpu", 0) == 0);
        QCOMPARE(policy.link, std::string("memcpy"));
        QCOMPARE(policy.speedup_threshold, 1.0);
        QCOMPARE(policy.int4_group, std::uint64_t(16));

        for (const auto& [key, by_rows] : speedups) {
            const auto& [kind_name, cols, format_name] = key;
            sp::LayerKind kind{};
            QVERIFY(sp::parse_layer_kind(kind_name, kind));
            const sp::GateRule* rule = policy.find(kind, cols, *sp::parse_precision(format_name));
            const double largest = by_rows.rbegin()->second;
            if (std::abs(largest - 1.0) <= kPrintTolerance) continue;  // too close to call from the table
            // A rule exists exactly when the largest size is faster...
            QCOMPARE(rule != nullptr, largest > 1.0);
            if (!rule) continue;
            QCOMPARE(rule->max_rows, by_rows.rbegin()->first);
            QVERIFY(by_rows.count(rule->min_rows));  // ...it starts at a measured size...
            for (const auto& [rows, s] : by_rows) {
                if (rows >= rule->min_rows)  // ...from which every size is faster...
                    QVERIFY2(s >= 1.0 - kPrintTolerance,
                             qPrintable(QString::asprintf("%s at %llu rows: %g", format_name.c_str(),
                                                          (unsigned long long)rows, s)));
            }
            // ...and the size just below it is not.
            const auto below = by_rows.find(rule->min_rows);
            if (below != by_rows.begin()) QVERIFY(std::prev(below)->second < 1.0 + kPrintTolerance);
            QVERIFY(std::abs(rule->measured_speedup - by_rows.at(rule->min_rows)) <= 2e-3);
            QVERIFY(rule->min_speedup <= rule->measured_speedup);
        }
        // The rules section names every measured (kind, cols, format).
        QVERIFY(r.out.contains("\nrules (speed-up >= 1):\n"));
        QCOMPARE(static_cast<std::size_t>(r.out.count("bf16 only") + r.out.count(" rows (x")),
                 speedups.size());
    }

    void bad_flags_exit_2_naming_the_flag() {
        QTemporaryDir dir;
        const QString out = dir.filePath("p.json");
        const std::vector<std::pair<QStringList, const char*>> cases = {
            {{"gate", "--out", out}, "--shapes"},
            {{"gate", "--shapes", "64x32"}, "--out"},
            {{"gate", "--shapes", "64xq", "--out", out}, "--shapes"},
            {{"gate", "--shapes", "0x32", "--out", out}, "--shapes"},
            {{"gate", "--shapes", "64x32,", "--out", out}, "--shapes"},
            {{"gate", "--shapes", "64x32", "--out", out, "--formats", "bf16"}, "--formats"},
            {{"gate", "--shapes", "64x32", "--out", out, "--formats", "int7"}, "--formats"},
            {{"gate", "--shapes", "64x32", "--out", out, "--repeats", "0"}, "--repeats"},
            {{"gate", "--shapes", "64x32", "--out", out, "--min-rows", "-4"}, "--min-rows"},
            {{"gate", "--shapes", "64x32", "--out", out, "--min-rows", "32", "--max-rows", "16"},
             "--max-rows"},
            {{"gate", "--shapes", "64x32", "--out", out, "--threshold", "0"}, "--threshold"},
            {{"gate", "--shapes", "64x32", "--out", out, "--threshold", "fast"}, "--threshold"},
            {{"gate", "--shapes", "64x32", "--out", out, "--int4-group", "0"}, "--int4-group"},
            {{"gate", "--shapes", "64x32", "--out", out, "--max-rows", "1099511627776"}, "--max-rows"},
            {{"gate", "--shapes", "64x32", "--out", out, "--speed"}, "--speed"},
            {{"gate", "--shapes", "64x32", "--out", out, "--repeats"}, "--repeats"},
            {{"gate", "--shapes", "64x32", "--out", out, "--link", "pcie"}, "--link"},
        };
        for (const auto& [args, flag] : cases) {
            const Run r = sp_ctl(args);
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ')));
            QVERIFY2(r.err.contains(flag), qPrintable(args.join(' ') + " -> " + r.err));
            QVERIFY(!QFile::exists(out));  // nothing measured, nothing written
        }
    }

    void unwritable_output_fails_before_measuring() {
        QTemporaryDir dir;
        const Run r = sp_ctl({"gate", "--shapes", "64x32", "--out", dir.filePath("no/such/dir/p.json")});
        QCOMPARE(r.exit_code, 1);
        QVERIFY(r.err.contains("cannot write"));
        QVERIFY(r.out.isEmpty());
    }

    void cuda_link_measures_or_refuses_writing_nothing() {
        // Without CUDA in the build, or without a device (CI: nvcc, no GPU), a named error, exit 1, and
        // no file; with a device, a policy measured on the CUDA link.
        QTemporaryDir dir;
        const QString out = dir.filePath("cuda.json");
        const Run r = sp_ctl({"gate", "--link", "cuda", "--shapes", "64x64", "--max-rows", "64", "--repeats",
                              "1", "--formats", "int8", "--out", out});
#if SP_CTL_HAVE_CUDA_LINK
        if (r.exit_code == 0) {
            QFile f(out);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const sp::FormatGatePolicy policy = sp::parse_gate_policy(f.readAll().toStdString());
            QCOMPARE(QString::fromStdString(policy.link), QString("cuda"));
            QVERIFY2(QString::fromStdString(policy.device).startsWith("cuda ("), policy.device.c_str());
            return;
        }
        QVERIFY2(r.err.contains("sp-ctl gate: --link cuda: no CUDA device"), r.err.constData());
#else
        QVERIFY2(r.err.contains("sp-ctl gate: --link cuda: this sp-ctl was built without CUDA"),
                 r.err.constData());
#endif
        QCOMPARE(r.exit_code, 1);
        QVERIFY(r.err.contains("nothing written"));
        QVERIFY(r.out.isEmpty());
        QVERIFY(!QFile::exists(out));
    }

    void help_lists_the_flags() {
        const Run r = sp_ctl({"gate", "--help"});
        QCOMPARE(r.exit_code, 0);
        for (const char* flag : {"--shapes", "--out", "--formats", "--min-rows", "--max-rows", "--repeats",
                                 "--threshold", "--int4-group", "--link"})
            QVERIFY(r.out.contains(flag));
        QVERIFY(sp_ctl({"--help"}).out.contains("gate"));
    }
};

QTEST_APPLESS_MAIN(TestSpCtlGate)
#include "test_sp_ctl_gate.moc"
