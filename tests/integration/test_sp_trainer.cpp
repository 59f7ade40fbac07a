// sp-trainer end to end on CPU: a short real training run with the agent and the reference runtime,
// its telemetry, the measured bytes against the routed map, and an exact re-simulation with sp-ctl.
#include <QtTest>

#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <cmath>
#include <fstream>
#include <set>

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

std::vector<nlohmann::json> read_jsonl(const QString& path) {
    std::ifstream in(path.toStdString());
    std::vector<nlohmann::json> out;
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
}

std::vector<nlohmann::json> parse_lines(const QByteArray& text) {
    std::vector<nlohmann::json> out;
    for (const QByteArray& line : text.trimmed().split('\n'))
        out.push_back(nlohmann::json::parse(line.toStdString()));
    return out;
}

// A small model and a config that routes early: quick enough for CI, real all the same.
QStringList small_run(const QString& telemetry, const QString& config) {
    return {"--steps",      "60",      "--blocks",           "3",      "--d-model", "32",
            "--heads",      "2",       "--seq-len",          "32",     "--batch",   "8",
            "--eval-every", "20",      "--eval-batches",     "2",      "--config",  config,
            "--telemetry",  telemetry, "--every-step-stats", "--seed", "7",         "--quiet",
            "--no-network"};
}

QString write_config(QTemporaryDir& dir) {
    QString path = dir.filePath("cfg.json");
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write config");
    f.write(
        R"({"selective_precision": {"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10,
              "run_calibration": true, "calibration_samples": 2, "calibration_cache_dir": ")" +
        dir.filePath("cache").toUtf8() + R"(", "log_decisions": false}})");
    return path;
}

// `sp-ctl simulate` on the recorded file reproduces every update's per-block precision and reason.
void expect_same_decisions(const QString& telemetry, const std::vector<nlohmann::json>& updates) {
    const Run sim = run(SP_CTL_PATH, {"simulate", "--stats", telemetry});
    QVERIFY2(sim.exit_code == 0, sim.err.constData());
    const auto replayed = parse_lines(sim.out);
    QCOMPARE(replayed.size(), updates.size());
    for (std::size_t i = 0; i < updates.size(); ++i)
        for (const auto& [id, d] : updates[i]["block_details"].items()) {
            QCOMPARE(replayed[i]["block_details"][id]["precision"], d["precision"]);
            QCOMPARE(replayed[i]["block_details"][id]["reason_text"], d["reason_text"]);
        }
}

}  // namespace

class TestSpTrainer : public QObject {
    Q_OBJECT
  private slots:
    void trains_routes_measures_and_resimulates() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("run.jsonl");
        const Run r = run(SP_TRAINER_PATH, small_run(telemetry, write_config(dir)));
        QVERIFY2(r.exit_code == 0, r.err.constData());

        const auto lines = read_jsonl(telemetry);
        QVERIFY(!lines.empty());
        QCOMPARE(lines[0]["type"].get<std::string>(), std::string("header"));
        QCOMPARE(lines[0]["blocks"].size(), std::size_t(3));
        QVERIFY(lines[0].contains("calibration"));  // calibration ran and is recorded
        std::vector<nlohmann::json> updates;
        int stats_lines = 0;
        for (const auto& j : lines) {
            if (j.contains("step_id")) updates.push_back(j);
            if (!j.contains("type") && j.contains("blocks") && !j.contains("step_id")) ++stats_lines;
        }
        QCOMPARE(stats_lines, 60);
        QCOMPARE(updates.size(), std::size_t(11));  // steps 5, 10, ..., 55
        double first_eval = NAN, last_eval = NAN;
        for (const auto& u : updates) {
            QVERIFY(u.contains("train_loss"));
            QVERIFY(u.contains("measured_bandwidth_saving_pct"));
            // Measured bytes follow the routed map: INT8 halves a block's bytes, less its row scales.
            const double estimated = u["estimated_bandwidth_saving_pct"].get<double>();
            const double measured = u["measured_bandwidth_saving_pct"].get<double>();
            QVERIFY2(measured <= estimated + 1e-9 && measured >= estimated - 3.0,
                     qPrintable(QString("step %1: measured %2, estimated %3")
                                    .arg(u["step_id"].get<qint64>())
                                    .arg(measured)
                                    .arg(estimated)));
            if (u.contains("eval_loss")) {
                // Each eval loss says the step it was measured at: the first at step 0, before
                // training, though the first update record comes at step 5.
                QVERIFY2(
                    u.contains("eval_step") && u["eval_step"].get<qint64>() <= u["step_id"].get<qint64>(),
                    qPrintable(QString::fromStdString(u.dump())));
                if (std::isnan(first_eval)) {
                    first_eval = u["eval_loss"].get<double>();
                    QCOMPARE(u["eval_step"].get<qint64>(), qint64(0));
                }
                last_eval = u["eval_loss"].get<double>();
            }
        }
        QVERIFY(!std::isnan(first_eval));
        QVERIFY2(last_eval < first_eval, qPrintable(QString("eval %1 -> %2").arg(first_eval).arg(last_eval)));
        // The run says it ended, at its last step; the file passes every check sp-ctl validate makes.
        QCOMPARE(lines.back()["kind"].get<std::string>(), std::string("run_end"));
        QCOMPARE(lines.back()["step"].get<int>(), 59);
        QCOMPARE(lines.back()["reason"].get<std::string>(), std::string("completed"));
        const Run valid = run(SP_CTL_PATH, {"validate", telemetry});
        QVERIFY2(valid.exit_code == 0, valid.out.constData());

        // Re-simulating the recorded run with its own settings gives the same decisions, bit for bit.
        const Run sim = run(SP_CTL_PATH, {"simulate", "--stats", telemetry});
        QVERIFY2(sim.exit_code == 0, sim.err.constData());
        const auto replayed = parse_lines(sim.out);
        QCOMPARE(replayed.size(), updates.size());
        for (std::size_t i = 0; i < updates.size(); ++i) {
            QCOMPARE(replayed[i]["step_id"], updates[i]["step_id"]);
            QCOMPARE(replayed[i]["blocks_int8"], updates[i]["blocks_int8"]);
            for (const auto& [id, d] : updates[i]["block_details"].items()) {
                QCOMPARE(replayed[i]["block_details"][id]["precision"], d["precision"]);
                QCOMPARE(replayed[i]["block_details"][id]["sensitivity"], d["sensitivity"]);
                QCOMPARE(replayed[i]["block_details"][id]["error_score"], d["error_score"]);
            }
        }

        // The same run again hits the calibration cache.
        const QString second = dir.filePath("run2.jsonl");
        const Run again = run(SP_TRAINER_PATH, small_run(second, dir.filePath("cfg.json")));
        QVERIFY2(again.exit_code == 0, again.err.constData());
        QVERIFY2(again.out.contains("cache"), again.out.constData());
    }

    // The outlier plant is function-preserving and the optimizer steps the unplanted weights: with a
    // power-of-two scale an all-BF16 run trains bit for bit as without it, while INT8 (whose per-token
    // scale the planted features set) trains differently.
    void outlier_plant_leaves_bf16_training_bit_identical() {
        QTemporaryDir dir;
        const QString config = dir.filePath("nocal.json");
        {
            QFile f(config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"run_calibration": false})");
        }
        auto train_losses = [&](const QString& precision, bool plant) {
            const QString summary = dir.filePath(precision + (plant ? "-plant" : "") + ".json");
            QStringList args = {"--steps",        "25",
                                "--blocks",       "3",
                                "--d-model",      "32",
                                "--heads",        "2",
                                "--seq-len",      "32",
                                "--eval-every",   "25",
                                "--eval-batches", "2",
                                "--precision",    precision,
                                "--config",       config,
                                "--no-telemetry", "--no-network",
                                "--quiet",        "--summary-json",
                                summary};
            if (plant)
                args << "--outlier-block"
                     << "1"
                     << "--outlier-scale"
                     << "64";
            const Run r = run(SP_TRAINER_PATH, args);
            if (r.exit_code != 0) qFatal("sp-trainer failed: %s", r.err.constData());
            std::ifstream in(summary.toStdString());
            return nlohmann::json::parse(in).at("train_loss").get<std::vector<double>>();
        };
        const auto bf16 = train_losses("bf16", false);
        QCOMPARE(bf16.size(), std::size_t(25));
        QVERIFY(bf16 == train_losses("bf16", true));
        QVERIFY(train_losses("int8", false) != train_losses("int8", true));
    }

    // SNR tiers on a model with planted outlier features: the normal blocks and the outlier block
    // take different formats below BF16, every block says why, and the file re-simulates exactly.
    // Then the budget mode holds its target and re-simulates too.
    void tiers_and_budget_route_several_formats_and_resimulate() {
        QTemporaryDir dir;
        const QString config = dir.filePath("tiers.json");
        {
            QFile f(config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            // Every block may leave BF16 (int8_threshold 0.9), so the SNR alone chooses the format;
            // the first assignment (step 5, on step 0's statistics, when the plant is fresh) holds
            // for the run (cooldown 100).
            f.write(R"({"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 100,
                        "int8_threshold": 0.9, "bf16_threshold": 1.0, "hysteresis_margin": 0.0,
                        "run_calibration": false, "log_decisions": false, "snr_tiers": true,
                        "distribution_interval_steps": 10})");
        }
        const QString telemetry = dir.filePath("tiers.jsonl");
        QStringList args = small_run(telemetry, config);
        const QString validation = dir.filePath("snr.jsonl");
        args.removeAll("--quiet");  // the agreement table follows the summary
        args << "--outlier-block"
             << "1"
             << "--outlier-scale"
             << "64"
             << "--snr-validation" << validation;
        const Run r = run(SP_TRAINER_PATH, args);
        QVERIFY2(r.exit_code == 0, r.err.constData());
        // --snr-validation: every layer of every block at each distribution step (0, 10, ..., 50), per
        // low format, with the truth and every estimate; and the agreement table on stdout.
        const auto checks = read_jsonl(validation);
        QCOMPARE(checks.size(), std::size_t(6 * 3 * 4 * 4));
        for (const auto& c : checks)
            for (const char* key :
                 {"truth", "zeroing", "sample", "output_sample", "output_sample_rows", "weight_measured"})
                QVERIFY2(c.contains(key), c.dump().c_str());
        QVERIFY2(r.out.contains("SNR validation: layer outputs"), r.out.constData());
        std::vector<nlohmann::json> updates;
        for (const auto& j : read_jsonl(telemetry))
            if (j.contains("step_id")) updates.push_back(j);
        QVERIFY(!updates.empty());
        std::set<std::string> low_formats;
        for (const auto& u : updates)
            for (const auto& [id, d] : u["block_details"].items()) {
                QVERIFY2(!d["reason_text"].get<std::string>().empty(), id.c_str());
                if (d["precision"] != "bf16") low_formats.insert(d["precision"].get<std::string>());
            }
        QVERIFY2(low_formats.size() >= 2, updates.back().dump().c_str());
        // The SNR tiers keep the outlier block out of the integer formats (its INT8 output SNR fails
        // the threshold) and send it to FP8, while the other blocks take an integer format.
        for (const auto& u : updates) {
            const auto& outlier = u["block_details"]["1"];
            QVERIFY2(outlier["precision"].get<std::string>().rfind("fp8", 0) == 0, outlier.dump().c_str());
            QVERIFY2(outlier["reason_text"].get<std::string>().find("int8") != std::string::npos,
                     outlier.dump().c_str());
            for (const char* normal : {"0", "2"}) {
                const std::string p = u["block_details"][normal]["precision"].get<std::string>();
                QVERIFY2(p == "int8" || p == "int4", u["block_details"][normal].dump().c_str());
            }
        }
        // INT8 loses far more in the outlier block than in a normal one, FP8 about as much, at every
        // distribution-statistics step: the optimizer steps the unplanted weights, so the plant lasts.
        int profiles = 0;
        for (const auto& j : read_jsonl(telemetry)) {
            if (!j.contains("snr")) continue;
            ++profiles;
            QVERIFY2(j["snr"][1]["snr_db"]["int8"].get<double>() <
                         j["snr"][0]["snr_db"]["int8"].get<double>() - 10.0,
                     j["snr"].dump().c_str());
            QVERIFY2(std::abs(j["snr"][1]["snr_db"]["fp8_e4m3"].get<double>() -
                              j["snr"][0]["snr_db"]["fp8_e4m3"].get<double>()) < 3.0,
                     j["snr"].dump().c_str());
        }
        QCOMPARE(profiles, 6);  // steps 0, 10, ..., 50
        expect_same_decisions(telemetry, updates);
        const Run valid = run(SP_CTL_PATH, {"validate", telemetry});
        QVERIFY2(valid.exit_code == 0, (valid.out + valid.err).constData());

        // Budget mode at 60%: the plan holds the target at every update after the first assignment.
        const QString budget_config = dir.filePath("budget.json");
        {
            QFile f(budget_config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10,
                        "run_calibration": false, "log_decisions": false, "mode": "budget",
                        "budget_target_pct": 60, "distribution_interval_steps": 10})");
        }
        const QString budget_telemetry = dir.filePath("budget.jsonl");
        const Run b = run(SP_TRAINER_PATH, small_run(budget_telemetry, budget_config));
        QVERIFY2(b.exit_code == 0, b.err.constData());
        std::vector<nlohmann::json> budget_updates;
        for (const auto& j : read_jsonl(budget_telemetry))
            if (j.contains("step_id")) budget_updates.push_back(j);
        QVERIFY(!budget_updates.empty());
        for (const auto& u : budget_updates) {
            QCOMPARE(u["budget_target_pct"].get<double>(), 60.0);
            QVERIFY2(u["estimated_bandwidth_saving_pct"].get<double>() >= 60.0, u.dump().c_str());
        }
        expect_same_decisions(budget_telemetry, budget_updates);
    }

    // The planted-sensitivity check, part one: calibration sees the harsh block, and the policy
    // keeps it in BF16 while it routes others to INT8.
    void calibration_keeps_the_harsh_block_in_bf16() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("cal.jsonl"), cfg = dir.filePath("cal.json");
        QFile f(cfg);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"log_decisions": false, "calibration_cache_dir": ")" + dir.filePath("cache").toUtf8() +
                R"("})");
        f.close();
        const Run r =
            run(SP_TRAINER_PATH, {"--steps", "60", "--harsh-block", "2", "--config", cfg, "--telemetry",
                                  telemetry, "--threads", "1", "--quiet", "--no-network"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto lines = read_jsonl(telemetry);
        const auto& errors = lines.at(0)["calibration"]["errors"];
        for (const char* other : {"0", "1", "3"})
            QVERIFY2(errors["2"].get<double>() > 10 * errors[other].get<double>(), errors.dump().c_str());
        int routed_others = 0;
        for (const auto& j : lines) {
            if (!j.contains("step_id")) continue;
            QCOMPARE(j["block_details"]["2"]["precision"].get<std::string>(), std::string("bf16"));
            for (const char* other : {"0", "1", "3"})
                routed_others += j["block_details"][other]["precision"] == "int8";
        }
        QVERIFY2(routed_others > 0, "the policy routed nothing: the check shows nothing");
    }

    // The planted-sensitivity check, end to end: without calibration the policy routes the harsh
    // block at step 50, the loss jumps, loss feedback rolls the switched blocks back, and the
    // recorded file re-simulates to the same rollback and decisions.
    void rollback_fires_on_a_harsh_switch_and_resimulates() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("rb.jsonl"), cfg = dir.filePath("rb.json");
        QFile f(cfg);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(
            R"({"log_decisions": false, "run_calibration": false, "rollback_enabled": true, "warmup_steps": 50})");
        f.close();
        const Run r = run(SP_TRAINER_PATH,
                          {"--steps", "70", "--harsh-block", "2", "--config", cfg, "--telemetry", telemetry,
                           "--every-step-stats", "--threads", "1", "--quiet", "--no-network"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.out.contains("(1 loss-feedback rollbacks)"), r.out.constData());

        const auto lines = read_jsonl(telemetry);
        std::vector<nlohmann::json> updates;
        std::vector<double> losses;
        nlohmann::json rollback;
        for (const auto& j : lines) {
            if (j.contains("step_id")) updates.push_back(j);
            if (!j.contains("type") && j.contains("blocks") && j.contains("loss"))
                losses.push_back(j["loss"]);
            if (j.value("kind", "") == "rollback") rollback = j;
        }
        QVERIFY(rollback.is_object());
        const int at = rollback["step"].get<int>();
        QVERIFY2(at > 50 && at <= 50 + 20, rollback.dump().c_str());  // within the window after the switch
        QVERIFY(rollback["z"].get<double>() > 6.0);
        QCOMPARE(rollback["blocks"].size(), std::size_t(3));  // everything the first assignment moved
        // The loss recovers: the steps after the rollback are back near the level before the switch.
        auto mean_of = [&](std::size_t from, std::size_t to) {
            double sum = 0;
            for (std::size_t k = from; k < to; ++k) sum += losses.at(k);
            return sum / double(to - from);
        };
        const double before = mean_of(45, 50), spike = losses.at(std::size_t(at));
        const double after = mean_of(losses.size() - 5, losses.size());
        QVERIFY2(spike > before + 0.3 && after < before + 0.1,
                 qPrintable(QString("before %1, spike %2, after %3").arg(before).arg(spike).arg(after)));

        const Run sim = run(SP_CTL_PATH, {"simulate", "--stats", telemetry});
        QVERIFY2(sim.exit_code == 0, sim.err.constData());
        QVERIFY2(sim.err.contains("1 rollbacks"), sim.err.constData());
        const auto replayed = parse_lines(sim.out);
        QCOMPARE(replayed.size(), updates.size());
        for (std::size_t i = 0; i < updates.size(); ++i)
            for (const auto& [id, d] : updates[i]["block_details"].items()) {
                QCOMPARE(replayed[i]["block_details"][id]["precision"], d["precision"]);
                QCOMPARE(replayed[i]["block_details"][id]["reason"], d["reason"]);
            }
    }

    // A burst of commands far beyond the telemetry queue's capacity: every command event reaches
    // the file (decisions are never dropped), so the file re-simulates to the decisions the run made.
    void command_flood_loses_no_decision() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("flood.jsonl");
        const std::string ctl = "ipc://" + dir.filePath("ctl").toStdString();
        // No rate limit here: the flood must reach the agent and its telemetry queue.
        const QString config = dir.filePath("flood.json");
        {
            QFile f(config);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"warmup_steps": 5, "update_interval_steps": 5, "min_steps_between_switches": 10,
                        "run_calibration": false, "log_decisions": false, "control_requests_per_second": 1000000})");
        }
        QStringList args = small_run(telemetry, config);
        args.removeAll("--no-network");
        args << "--steps"
             << "1500"
             << "--telemetry-endpoint" << QString::fromStdString("ipc://" + dir.filePath("pub").toStdString())
             << "--control-endpoint" << QString::fromStdString(ctl);
        QProcess trainer;
        trainer.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        trainer.start(QStringLiteral(SP_TRAINER_PATH), args);
        QVERIFY(trainer.waitForStarted(10000));

        zmq::context_t ctx;
        zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
        dealer.set(zmq::sockopt::linger, 0);
        dealer.connect(ctl);
        constexpr int kRequests = 4000;
        int accepted = 0, answered = 0;
        for (int i = 0; i < kRequests; ++i) {
            const nlohmann::json req =
                i % 2 == 0 ? nlohmann::json{{"id", std::to_string(i)},
                                            {"cmd", "pin"},
                                            {"blocks", {1}},
                                            {"precision", "int8"}}
                           : nlohmann::json{{"id", std::to_string(i)}, {"cmd", "release"}, {"blocks", {1}}};
            dealer.send(zmq::buffer(req.dump()), zmq::send_flags::none);
        }
        while (answered < kRequests) {
            zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
            if (zmq::poll(&item, 1, std::chrono::milliseconds(30000)) == 0) break;
            zmq::message_t reply;
            while (dealer.recv(reply, zmq::recv_flags::dontwait)) {
                ++answered;
                accepted += nlohmann::json::parse(reply.to_string_view()).value("ok", false) ? 1 : 0;
            }
        }
        QCOMPARE(answered, kRequests);
        QVERIFY(trainer.waitForFinished(120000));
        QCOMPARE(trainer.exitCode(), 0);

        std::vector<nlohmann::json> updates;
        int command_events = 0, dropped = 0;
        for (const auto& j : read_jsonl(telemetry)) {
            if (j.contains("step_id")) updates.push_back(j);
            if (j.value("kind", "") == "command") ++command_events;
            if (j.value("kind", "") == "dropped") dropped += j.value("count", 0);
        }
        QCOMPARE(command_events, accepted);
        QVERIFY2(dropped < int(updates.size()) + 200, "more lost than update records exist");
        expect_same_decisions(telemetry, updates);
    }

    // SIGTERM during set-up (here a long first evaluation, before the header is written): the process
    // ends at once, as before, but the telemetry file it created is gone while still empty, rather than
    // left as a 0-byte file that readers call cut.
    void a_signal_during_set_up_leaves_no_empty_file() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("early.jsonl");
        QStringList args = small_run(telemetry, write_config(dir));
        args[args.indexOf("--eval-batches") + 1] = "4000";
        QProcess trainer;
        trainer.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        trainer.start(QStringLiteral(SP_TRAINER_PATH), args);
        QVERIFY(trainer.waitForStarted(10000));
        QTRY_VERIFY_WITH_TIMEOUT(QFileInfo::exists(telemetry), 60000);  // the agent has opened it
        QCOMPARE(QFileInfo(telemetry).size(), qint64(0));
        ::kill(pid_t(trainer.processId()), SIGTERM);
        QVERIFY(trainer.waitForFinished(60000));
        QCOMPARE(trainer.exitStatus(), QProcess::CrashExit);  // the signal's default action, re-raised
        QVERIFY2(!QFileInfo::exists(telemetry), "the empty telemetry file was left behind");
    }

    // Ctrl-C ends the run between two steps: the summary is printed, the file ends with a run_end
    // record saying "interrupted", and the exit code is the shell's for SIGINT.
    void ctrl_c_ends_the_run_cleanly() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("cut.jsonl");
        QStringList args = small_run(telemetry, write_config(dir));
        args << "--steps"
             << "1000000";
        QProcess trainer;
        trainer.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        trainer.start(QStringLiteral(SP_TRAINER_PATH), args);
        QVERIFY(trainer.waitForStarted(10000));
        // Some steps first: the statistics lines (one per step) reach the file.
        QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(telemetry).size() > 20000, 60000);
        ::kill(pid_t(trainer.processId()), SIGINT);
        QVERIFY(trainer.waitForFinished(60000));
        QCOMPARE(trainer.exitStatus(), QProcess::NormalExit);
        QCOMPARE(trainer.exitCode(), 128 + SIGINT);
        QVERIFY(trainer.readAllStandardOutput().contains("summary"));

        const auto lines = read_jsonl(telemetry);
        const nlohmann::json& end = lines.back();
        QCOMPARE(end["kind"].get<std::string>(), std::string("run_end"));
        QCOMPARE(end["reason"].get<std::string>(), std::string("interrupted"));
        QVERIFY(end["step"].get<int>() > 0);
        const Run valid = run(SP_CTL_PATH, {"validate", telemetry});
        QVERIFY2(valid.exit_code == 0, valid.out.constData());
    }

    // A telemetry file that cannot be written: training finishes, the first failure is a warning
    // naming the file and the reason, the summary says how many records were lost of how many, and
    // the exit status (3) says the run is not clean.
    void unwritable_telemetry_is_loud_and_training_goes_on() {
        if (::access("/dev/full", W_OK) != 0) QSKIP("/dev/full is not available");
        QTemporaryDir dir;
        QStringList args = small_run("/dev/full", write_config(dir));
        args.removeAll("--quiet");
        const QString summary_path = dir.filePath("summary.json");
        args << "--summary-json" << summary_path;
        const Run r = run(SP_TRAINER_PATH, args);
        // Training completed, but records were lost: exit 3, said on stderr and in the summary.
        QVERIFY2(r.exit_code == 3, r.err.constData());
        QVERIFY2(r.err.contains("sp-trainer: the run completed, but ") &&
                     r.err.contains("telemetry records were lost to write errors: exit 3"),
                 r.err.constData());
        std::ifstream summary_file(summary_path.toStdString());
        const nlohmann::json j = nlohmann::json::parse(summary_file);
        QVERIFY(j.at("telemetry_records_lost_to_errors").get<std::uint64_t>() > 60);
        QCOMPARE(j.at("telemetry_records_lost").get<std::uint64_t>(),
                 j.at("telemetry_records_lost_to_errors").get<std::uint64_t>());
        QCOMPARE(r.err.count("records are lost until writes succeed again"), 1);
        QVERIFY2(r.err.contains("writing telemetry file '/dev/full' failed: No space left on device"),
                 r.err.constData());
        const QRegularExpression summary(
            R"(telemetry +/dev/full \((\d+) of (\d+) records lost, (\d+) to write errors: )");
        const QRegularExpressionMatch m = summary.match(QString::fromUtf8(r.out));
        QVERIFY2(m.hasMatch(), r.out.constData());
        QVERIFY(m.captured(2).toInt() > 60);  // a header, 60 statistics lines, updates, events
        QCOMPARE(m.captured(1), m.captured(2));
        QCOMPARE(m.captured(3), m.captured(2));
    }

    void bad_flags_exit_2_and_write_nothing() {
        QTemporaryDir dir;
        const QString telemetry = dir.filePath("bad.jsonl");
        const QList<QStringList> bad = {
            {"--steps", "ten"},
            {"--steps", "-1"},  // 0 evaluates and exits (test_sp_trainer_checkpoint)
            {"--d-model", "30", "--heads", "4"},
            {"--precision", "fp4"},
            {"--device", "tpu"},
            {"--bogus"},
            {"--config", dir.filePath("missing.json")},
            {"--text", dir.filePath("missing.txt")},
            {"--harsh-block", "4"},  // the default model has blocks 0..3
            {"--harsh-step", "0"},
        };
        for (QStringList args : bad) {
            args << "--telemetry" << telemetry << "--no-network";
            const Run r = run(SP_TRAINER_PATH, args);
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + " -> " + QString::number(r.exit_code)));
            QVERIFY2(!r.err.isEmpty(), qPrintable(args.join(' ')));
            QVERIFY2(!QFile::exists(telemetry), qPrintable(args.join(' ')));
        }
        const QString cfg = dir.filePath("cfg.json");
        QFile f(cfg);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"bf16_treshold": 0.5})");
        f.close();
        const Run r = run(SP_TRAINER_PATH, {"--config", cfg, "--telemetry", telemetry, "--no-network"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("did you mean 'bf16_threshold'"), r.err.constData());
        QVERIFY(!QFile::exists(telemetry));

        // A number beyond double range is a configuration error, not an abort.
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(R"({"warmup_steps": 1e309})");
        f.close();
        const Run huge = run(SP_TRAINER_PATH, {"--config", cfg, "--telemetry", telemetry, "--no-network"});
        QCOMPARE(huge.exit_code, 2);
        QVERIFY2(
            huge.err.contains("cfg.json: not valid JSON: column 18, key 'warmup_steps': number beyond the "
                              "range of a double: 1e309"),
            huge.err.constData());
        QVERIFY(!QFile::exists(telemetry));
    }

    // Key file mistakes stop sp-trainer before it binds or trains: exit 2 with the reason.
    void curve_key_mistakes_exit_2() {
        QTemporaryDir dir;
        QCOMPARE(run(SP_CTL_PATH, {"keygen", dir.filePath("server")}).exit_code, 0);
        QCOMPARE(run(SP_CTL_PATH, {"keygen", dir.filePath("client")}).exit_code, 0);
        const QString key = dir.filePath("server.key"), allowed = dir.filePath("client.pub");
        const QStringList small = {"--steps",
                                   "1",
                                   "--blocks",
                                   "1",
                                   "--d-model",
                                   "16",
                                   "--heads",
                                   "2",
                                   "--seq-len",
                                   "16",
                                   "--batch",
                                   "2",
                                   "--no-telemetry",
                                   "--quiet",
                                   "--telemetry-endpoint",
                                   "ipc://" + dir.filePath("tel"),
                                   "--control-endpoint",
                                   "ipc://" + dir.filePath("ctl")};
        const auto refused = [&](const QStringList& keys, const QByteArray& says) {
            const Run r = run(SP_TRAINER_PATH, QStringList(small) << keys);
            QVERIFY2(r.exit_code == 2, qPrintable(keys.join(' ') + " -> " + QString::number(r.exit_code)));
            QVERIFY2(r.err.contains(says), r.err.constData());
        };
        refused(
            {"--allowed-clients", allowed},
            "sp-trainer: --allowed-clients needs --server-key: without the agent's secret key there is no "
            "CURVE, so nothing would check the allow-list and every client would get in");
        refused({"--server-key", dir.filePath("server.pub"), "--allowed-clients", allowed},
                "CURVE key file '" + dir.filePath("server.pub").toUtf8() +
                    "' holds a public key, but a secret key is expected here (give the NAME.key file from "
                    "sp-ctl keygen, not NAME.pub)");
        QVERIFY(QFile::setPermissions(
            key, QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup | QFile::ReadOther));
        refused({"--server-key", key, "--allowed-clients", allowed},
                "permissions 0644 for '" + key.toUtf8() +
                    "' are too open; the secret key must be readable by its owner only (chmod 600 " +
                    key.toUtf8() + ")");
    }
};

QTEST_GUILESS_MAIN(TestSpTrainer)
#include "test_sp_trainer.moc"
