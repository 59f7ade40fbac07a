// sp-trainer on the loss estimate (core/POLICY.md rules 22 and 23), end to end: the precision scope
// travels into the header, the agent estimates every block's loss change at each profiling step from
// the real output gradients, mode tolerance keeps the records' plans within the tolerance, budget on
// the loss holds its target, the Why text quotes the estimate, and `sp-ctl simulate` replays both modes
// decision for decision from the file.
#include <QtTest>

#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

std::vector<nlohmann::json> read_jsonl(const QString& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path.toStdString());
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
}

QString write_file(QTemporaryDir& dir, const QString& name, const QByteArray& text) {
    const QString path = dir.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
    f.write(text);
    return path;
}

QStringList run_args(const QString& telemetry, const QString& config, const QString& scope) {
    return {"--steps",
            "40",
            "--blocks",
            "3",
            "--d-model",
            "32",
            "--heads",
            "2",
            "--seq-len",
            "32",
            "--batch",
            "8",
            "--eval-every",
            "20",
            "--eval-batches",
            "2",
            "--config",
            config,
            "--telemetry",
            telemetry,
            "--every-step-stats",
            "--seed",
            "7",
            "--quiet",
            "--no-network",
            "--threads",
            "1",
            "--precision-scope",
            scope};
}

// `sp-ctl simulate` reproduces every update's precisions, reasons and plan estimate.
void expect_same_decisions(const QString& telemetry, const std::vector<nlohmann::json>& updates) {
    const Run sim = run(SP_CTL_PATH, {"simulate", "--stats", telemetry});
    QVERIFY2(sim.exit_code == 0, sim.err.constData());
    std::vector<nlohmann::json> replayed;
    for (const QByteArray& line : sim.out.trimmed().split('\n'))
        replayed.push_back(nlohmann::json::parse(line.toStdString()));
    QCOMPARE(replayed.size(), updates.size());
    for (std::size_t i = 0; i < updates.size(); ++i) {
        QCOMPARE(replayed[i].value("estimated_loss_pct", -1.0), updates[i].value("estimated_loss_pct", -1.0));
        for (const auto& [id, d] : updates[i]["block_details"].items()) {
            QCOMPARE(replayed[i]["block_details"][id]["precision"], d["precision"]);
            QCOMPARE(replayed[i]["block_details"][id]["reason_text"], d["reason_text"]);
        }
    }
}

std::vector<nlohmann::json> updates_of(const std::vector<nlohmann::json>& lines) {
    std::vector<nlohmann::json> out;
    for (const auto& j : lines)
        if (j.contains("step_id")) out.push_back(j);
    return out;
}

}  // namespace

class TestSpTrainerLoss : public QObject {
    Q_OBJECT
  private slots:
    void tolerance_in_the_weights_scope() {
        QTemporaryDir dir;
        // A tolerance small enough to bind on this model (its blocks' INT4 estimates are about 5e-6 ...
        // 1.5e-4 % of the loss, their INT8 ones a hundred times less).
        const QString config =
            write_file(dir, "tolerance.json", R"({"mode": "tolerance", "loss_tolerance_pct": 0.000015,
            "warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 5,
            "distribution_interval_steps": 10, "run_calibration": false, "log_decisions": false})");
        const QString telemetry = dir.filePath("tolerance.jsonl");
        const Run r = run(SP_TRAINER_PATH, run_args(telemetry, config, "weights"));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto lines = read_jsonl(telemetry);
        QCOMPARE(lines.front()["config"]["precision_scope"], "weights");
        int estimates = 0;
        for (const auto& j : lines) {
            if (!j.contains("loss_estimates")) continue;
            ++estimates;
            QCOMPARE(j["loss_estimates"].size(), std::size_t(3));  // every block, every layer seen
            for (const auto& e : j["loss_estimates"])
                for (const char* f : {"int8", "int4", "fp8_e4m3", "fp8_e5m2"})
                    QVERIFY2(e["loss_delta"][f].get<double>() > 0.0, e.dump().c_str());
        }
        QCOMPARE(estimates, 4);  // steps 0, 10, 20, 30
        const auto updates = updates_of(lines);
        QVERIFY(!updates.empty());
        bool some_int4 = false, some_not_int4 = false;
        for (const auto& u : updates) {
            QCOMPARE(u["mode"], "tolerance");
            QCOMPARE(u["loss_tolerance_pct"].get<double>(), 0.000015);
            // The plan's estimate, recomputed from the blocks' own, is within the tolerance.
            double sum = 0;
            for (const auto& [id, d] : u["block_details"].items()) {
                const std::string p = d["precision"];
                if (p != "bf16") sum += d["loss_delta_pct"][p].get<double>();
                (p == "int4" ? some_int4 : some_not_int4) = true;
                const std::string why = d["reason_text"];
                QVERIFY2(why.find("tolerance 1.5e-05%, on the loss estimate: " + p) == 0, why.c_str());
                QVERIFY2(why.find("\u2248 +") != std::string::npos, why.c_str());
            }
            QVERIFY2(std::abs(sum - u["estimated_loss_pct"].get<double>()) < 1e-9, u.dump().c_str());
            QVERIFY2(sum <= 0.000015 + 1e-15, u.dump().c_str());
        }
        QVERIFY2(some_int4 && some_not_int4, updates.back().dump().c_str());  // the tolerance binds
        expect_same_decisions(telemetry, updates);
        const Run valid = run(SP_CTL_PATH, {"validate", telemetry});
        QVERIFY2(valid.exit_code == 0, (valid.out + valid.err).constData());
    }

    void budget_on_the_loss_with_adapters_in_the_compute_scope() {
        QTemporaryDir dir;
        const QString config = write_file(dir, "budget.json", R"({"mode": "budget", "cost_estimator": "loss",
            "budget_target_pct": 60, "warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 5,
            "distribution_interval_steps": 10, "run_calibration": false, "log_decisions": false})");
        const QString telemetry = dir.filePath("budget.jsonl");
        // With adapters: the frozen first block's base outputs need no gradient, its layers' whole outputs
        // do.
        const Run r = run(SP_TRAINER_PATH, run_args(telemetry, config, "compute") +
                                               QStringList{"--finetune-mode", "adapters"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto lines = read_jsonl(telemetry);
        int estimates = 0;
        for (const auto& j : lines)
            if (j.contains("loss_estimates")) {
                ++estimates;
                QCOMPARE(j["loss_estimates"].size(), std::size_t(3));
            }
        QCOMPARE(estimates, 4);
        QCOMPARE(lines.front()["config"]["precision_scope"], "compute");
        QCOMPARE(lines.front()["config"]["cost_estimator"], "loss");
        const auto updates = updates_of(lines);
        QVERIFY(!updates.empty());
        for (const auto& u : updates) {
            QCOMPARE(u["budget_target_pct"].get<double>(), 60.0);
            QVERIFY2(u["estimated_bandwidth_saving_pct"].get<double>() >= 60.0, u.dump().c_str());
            QVERIFY(u.contains("estimated_loss_pct"));
        }
        expect_same_decisions(telemetry, updates);
    }

    void a_bad_scope_is_a_usage_error() {
        const Run r =
            run(SP_TRAINER_PATH, {"--precision-scope", "activations", "--steps", "1", "--no-network"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("--precision-scope"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerLoss)
#include "test_sp_trainer_loss.moc"
