// `sp-ctl simulate` end to end: the bundled example, the seed's schema, exit codes on bad input.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "run_process.h"
#include "sp/jsonl.h"

namespace {

using sp::test::Run;
using sp::test::sp_ctl;

QString example(const char* file) {
    return QStringLiteral(SP_SOURCE_DIR "/resources/example/") + file;
}

QStringList example_args() {
    return {"simulate",
            "--config",
            example("config.json"),
            "--stats",
            example("stats.jsonl"),
            "--calibration",
            example("calibration.json")};
}

QString write_file(QTemporaryDir& dir, const char* name, const QByteArray& content) {
    QString path = dir.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write temp file");
    f.write(content);
    return path;
}

}  // namespace

class TestSpCtlSimulate : public QObject {
    Q_OBJECT
  private slots:
    void example_matches_the_seed_schema() {
        const Run r = sp_ctl(example_args());
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QList<QByteArray> lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 19);  // 200 steps: updates at 10, 20, ..., 190
        const std::vector<std::string> seed = {
            "step_id",         "timestamp",         "blocks_bf16",
            "blocks_int8",     "mean_sensitivity",  "max_sensitivity",
            "min_sensitivity", "precision_changes", "estimated_bandwidth_saving_pct",
            "block_details"};
        const std::vector<std::string> detail = {
            "precision", "sensitivity", "grad_score", "error_score", "relative_magnitude",
            "l2_norm",   "max_abs",     "variance",   "forced",      "changed"};
        std::int64_t step = 0;
        for (const QByteArray& line : lines) {
            const auto j = nlohmann::ordered_json::parse(line.toStdString());  // keeps the key order
            QVERIFY(!j.contains("type"));
            std::vector<std::string> keys;
            for (const auto& [k, v] : j.items()) keys.push_back(k);
            QVERIFY(keys.size() >= seed.size());
            for (std::size_t i = 0; i < seed.size(); ++i)
                QCOMPARE(keys[i], seed[i]);  // seed fields, in order
            step += 10;
            QCOMPARE(j["step_id"].get<std::int64_t>(), step);
            QCOMPARE(j["blocks_bf16"].get<int>() + j["blocks_int8"].get<int>(), 48);
            QCOMPARE(int(j["block_details"].size()), 48);
            for (const auto& [id, d] : j["block_details"].items()) {
                for (const std::string& k : detail) QVERIFY2(d.contains(k), (id + " lacks " + k).c_str());
            }
            QCOMPARE(j["block_details"]["0"]["precision"].get<std::string>(), std::string("int8"));
            QCOMPARE(j["block_details"]["0"]["forced"].get<std::string>(), std::string("config"));
            QCOMPARE(j["block_details"]["47"]["precision"].get<std::string>(), std::string("bf16"));
            const int int8 = j["blocks_int8"].get<int>();
            QCOMPARE(j["estimated_bandwidth_saving_pct"].get<double>(),
                     100.0 * (1.0 - (48.0 - int8 * 0.5) / 48.0));
        }
        // Block 10 (int8) has a NaN burst at step 95: at the update of step 100 it scores 1 and is
        // promoted to bf16 (the unit tests cover the promotion inside a cooldown).
        const auto at90 = nlohmann::json::parse(lines[8].toStdString());
        QCOMPARE(at90["block_details"]["10"]["precision"].get<std::string>(), std::string("int8"));
        const auto at100 = nlohmann::json::parse(lines[9].toStdString());
        QCOMPARE(at100["block_details"]["10"]["sensitivity"].get<double>(), 1.0);
        QCOMPARE(at100["block_details"]["10"]["precision"].get<std::string>(), std::string("bf16"));
        QCOMPARE(at100["block_details"]["10"]["reason"].get<std::string>(), std::string("nonfinite"));
        QVERIFY(at100["block_details"]["10"]["changed"].get<bool>());
        // Blocks 3 and 4 are pinned to bf16 from step 120 until their release at 160.
        const auto at150 = nlohmann::json::parse(lines[14].toStdString());
        QCOMPARE(at150["block_details"]["3"]["forced"].get<std::string>(), std::string("pin"));
        QCOMPARE(at150["block_details"]["4"]["precision"].get<std::string>(), std::string("bf16"));
        const auto at160 = nlohmann::json::parse(lines[15].toStdString());
        QVERIFY(at160["block_details"]["3"]["forced"].is_null());
        // The run routes a real share of the blocks: early blocks int8, late ones bf16.
        const auto last = nlohmann::json::parse(lines.last().toStdString());
        QVERIFY(last["blocks_int8"].get<int>() >= 10);
        QVERIFY(last["blocks_bf16"].get<int>() >= 5);
        QVERIFY2(r.err.contains("48 blocks, 200 steps, 19 updates, 2 commands"), r.err.constData());
    }

    void output_reads_back_with_the_telemetry_reader() {
        const Run r = sp_ctl(example_args());
        QCOMPARE(r.exit_code, 0);
        std::istringstream in(r.out.toStdString());
        sp::JsonlReader reader(in);
        sp::TelemetryRecord rec;
        int n = 0;
        while (reader.next(rec)) {
            QVERIFY(std::holds_alternative<sp::UpdateRecord>(rec));
            ++n;
        }
        QCOMPARE(n, 19);
        QVERIFY(reader.problems().empty());
    }

    void table_format() {
        QStringList args = example_args();
        args << "--format"
             << "table";
        const Run r = sp_ctl(args);
        QCOMPARE(r.exit_code, 0);
        QCOMPARE(r.out.trimmed().split('\n').size(), 20);  // header + 19 updates
        QVERIFY(r.out.startsWith("  step  mode"));
    }

    void bad_input_exits_2_and_prints_nothing() {
        QTemporaryDir dir;
        const QString bad_stats =
            write_file(dir, "bad.jsonl",
                       "{\"step\":0,\"blocks\":[{\"id\":0,\"l2_norm\":1,\"max_abs\":1,\"variance\":1}]}\n{"
                       "\"step\":1,\"blocks\":[{\"id\":0,\"l2_norm\":\"x\"}]}\n");
        Run r = sp_ctl({"simulate", "--stats", bad_stats});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.out.isEmpty());
        QVERIFY2(r.err.contains("bad.jsonl:2:"), r.err.constData());

        const QString bad_config =
            write_file(dir, "cfg.json", R"({"selective_precision":{"bf16_treshold":0.5}})");
        r = sp_ctl({"simulate", "--stats", example("stats.jsonl"), "--config", bad_config});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.out.isEmpty());
        QVERIFY2(r.err.contains("bf16_treshold") && r.err.contains("did you mean 'bf16_threshold'"),
                 r.err.constData());

        // A cut last line (no newline, not JSON) is reported and skipped, as the other tools do.
        const QString cut =
            write_file(dir, "cut.jsonl",
                       "{\"step\":0,\"blocks\":[{\"id\":0,\"l2_norm\":1,\"max_abs\":1,\"variance\":1}]}\n"
                       "{\"step\":1,\"blocks\":[{\"id\":0,\"l2_n");
        r = sp_ctl({"simulate", "--stats", cut});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.err.contains("cut.jsonl:2: truncated last line skipped: not valid JSON: "),
                 r.err.constData());
        QVERIFY2(r.err.contains("1 steps"), r.err.constData());

        // A number beyond double range, in a stats line or in the config: exit 2 naming line and key.
        const QString huge_stats = write_file(
            dir, "huge.jsonl",
            "{\"step\":0,\"blocks\":[{\"id\":0,\"l2_norm\":1e309,\"max_abs\":1,\"variance\":1}]}\n");
        r = sp_ctl({"simulate", "--stats", huge_stats});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(
            r.err.contains("huge.jsonl:1: not valid JSON: column 39, key 'blocks[0].l2_norm': number beyond"),
            r.err.constData());
        const QString huge_config = write_file(dir, "huge.json", R"({"warmup_steps": 1e309})");
        r = sp_ctl({"simulate", "--stats", example("stats.jsonl"), "--config", huge_config});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.out.isEmpty());
        QVERIFY2(r.err.contains("huge.json: not valid JSON: column 18, key 'warmup_steps'"),
                 r.err.constData());

        r = sp_ctl({"simulate", "--stats", dir.filePath("missing.jsonl")});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("cannot open stats file"), r.err.constData());
        r = sp_ctl({"simulate", "--stats", "/dev/zero"});  // it would never end
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("'/dev/zero': it is a character device"), r.err.constData());
        r = sp_ctl({"simulate", "--stats", example("stats.jsonl"), "--calibration", "/dev/zero"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("'/dev/zero': it is a character device"), r.err.constData());
        r = sp_ctl({"simulate"});
        QCOMPARE(r.exit_code, 2);
        r = sp_ctl({"simulate", "--stats", example("stats.jsonl"), "--format", "xml"});
        QCOMPARE(r.exit_code, 2);
        r = sp_ctl({"simulate", "--bogus"});
        QCOMPARE(r.exit_code, 2);
        r = sp_ctl({"frobnicate"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("unknown command"));
    }
};

QTEST_GUILESS_MAIN(TestSpCtlSimulate)
#include "test_sp_ctl_simulate.moc"
