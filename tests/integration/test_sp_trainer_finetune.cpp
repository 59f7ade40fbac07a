// sp-trainer --finetune-mode adapters end to end: the adapters start as the identity (the loaded
// model's eval loss to the last bit), train, are what the agent reads gradients from, while the base
// the layout counts and the runtime stores stays pristine, whatever format it was stored in.
#include <QtTest>

#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

QStringList small(const QStringList& more) {
    return QStringList{"--blocks",       "2", "--d-model", "32", "--seq-len",    "32",      "--batch", "4",
                       "--eval-batches", "2", "--threads", "1",  "--no-network", "--quiet", "--seed",  "3"} +
           more;
}

nlohmann::json json_file(const QString& path) {
    std::ifstream in(path.toStdString());
    return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> jsonl(const QString& path) {
    std::ifstream in(path.toStdString());
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

Run trainer(const QStringList& args) {
    return run(SP_TRAINER_PATH, args);
}

double eval_of(const QString& summary) {
    return json_file(summary)["initial_eval_loss"].get<double>();
}

}  // namespace

class TestSpTrainerFinetune : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString base_;

  private slots:
    void initTestCase() {
        base_ = dir_.filePath("base.pt");
        const Run r = trainer(
            small({"--steps", "40", "--precision", "bf16", "--no-telemetry", "--save-checkpoint", base_}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
    }

    // Zero B: the adapters leave the loaded model's function alone, bit for bit.
    void adapters_start_as_the_identity() {
        const QString full = dir_.filePath("full.json"), adapters = dir_.filePath("adapters.json");
        QVERIFY(trainer(small({"--steps", "0", "--precision", "bf16", "--no-telemetry", "--init-checkpoint",
                               base_, "--summary-json", full}))
                    .exit_code == 0);
        const Run r =
            trainer(small({"--steps", "0", "--precision", "bf16", "--no-telemetry", "--init-checkpoint",
                           base_, "--finetune-mode", "adapters", "--summary-json", adapters}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(eval_of(adapters), eval_of(full));
    }

    // Stored in INT4 and fine-tuned, the base comes out as it went in: its checkpoint (adapters
    // ignored when loading) scores exactly what the pretrained one scores. The adapters trained
    // (the loss moved), their gradients are what the agent read (numel), and the layout counts the
    // base's bytes.
    void the_base_stays_pristine_and_the_agent_reads_the_adapters() {
        const QString ft = dir_.filePath("ft.pt"), telemetry = dir_.filePath("ft.jsonl");
        const QString summary = dir_.filePath("ft.json");
        Run r =
            trainer(small({"--steps", "30", "--precision", "int4", "--lr", "0.01", "--init-checkpoint", base_,
                           "--finetune-mode", "adapters", "--adapter-rank", "4", "--telemetry", telemetry,
                           "--every-step-stats", "--save-checkpoint", ft, "--summary-json", summary}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto s = json_file(summary);
        QVERIFY(s["final_eval_loss"].get<double>() != s["initial_eval_loss"].get<double>());
        QCOMPARE(s["block_steps"]["int4"].get<int>(), 60);

        const QString before = dir_.filePath("before.json"), after = dir_.filePath("after.json");
        QVERIFY(trainer(small({"--steps", "0", "--precision", "bf16", "--no-telemetry", "--init-checkpoint",
                               base_, "--summary-json", before}))
                    .exit_code == 0);
        QVERIFY(trainer(small({"--steps", "0", "--precision", "bf16", "--no-telemetry", "--init-checkpoint",
                               ft, "--summary-json", after}))
                    .exit_code == 0);
        QCOMPARE(eval_of(after), eval_of(before));

        const auto records = jsonl(telemetry);
        // rank 4 on d 32: qkv 4*32 + 96*4, attn_out 4*32 + 32*4, mlp_in 4*32 + 128*4, mlp_out 4*128 + 32*4
        const int adapter_numel = 512 + 256 + 640 + 640;
        const int base_params =
            2 * 32 + (32 * 96 + 96) + (32 * 32 + 32) + 2 * 32 + (32 * 128 + 128) + (128 * 32 + 32);
        QCOMPARE(records.front()["blocks"][0]["bytes_bf16"].get<int>(), 2 * base_params);
        bool saw_stats = false;
        for (const auto& rec : records)
            if (rec.contains("step") && rec.contains("blocks") && !rec.contains("type")) {
                QCOMPARE(rec["blocks"][0]["numel"].get<int>(), adapter_numel);
                saw_stats = true;
            }
        QVERIFY(saw_stats);
        QVERIFY(run(SP_CTL_PATH, {"validate", telemetry}).exit_code == 0);
    }

    void adapter_rank_without_adapters_is_a_usage_error() {
        const Run r = trainer(small({"--steps", "0", "--adapter-rank", "4"}));
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("--adapter-rank needs --finetune-mode adapters"), r.err.constData());
        QCOMPARE(trainer(small({"--steps", "0", "--finetune-mode", "lora"})).exit_code, 2);
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerFinetune)
#include "test_sp_trainer_finetune.moc"
