// sp-trainer --probe-maps / --probe-out and --text-part end to end: probing leaves the training
// trajectory bit for bit as it was, all-BF16 probes measure no gap, a low map measures a gap and
// saves the bytes the runtime counts, the summary's "maps" record what each step computed with,
// and a bad maps file is a bad value (exit 2, naming the file and line).
#include <QtTest>

#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

QStringList small(const QStringList& more) {
    return QStringList{"--blocks",     "2",       "--d-model",      "32", "--seq-len",     "32",
                       "--batch",      "4",       "--eval-batches", "2",  "--threads",     "1",
                       "--no-network", "--quiet", "--seed",         "3",  "--no-telemetry"} +
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

void write(const QString& path, const std::string& text) {
    std::ofstream(path.toStdString()) << text;
}

}  // namespace

class TestSpTrainerProbes : public QObject {
    Q_OBJECT

  private slots:
    void probes_measure_maps_without_changing_training() {
        QTemporaryDir dir;
        const QString maps = dir.filePath("maps.jsonl"), out = dir.filePath("probes.jsonl");
        write(maps,
              "{\"step\": 0, \"name\": \"bf16\", \"map\": [\"bf16\", \"bf16\"]}\n"
              "{\"step\": 6, \"name\": \"int4\", \"map\": [\"int4\", \"int4\"]}\n"
              "\n"
              "{\"step\": 12, \"name\": \"mixed\", \"map\": [\"fp8_e4m3\", \"bf16\"]}\n");
        const Run plain =
            run(SP_TRAINER_PATH, small({"--steps", "12", "--summary-json", dir.filePath("a.json")}));
        QVERIFY2(plain.exit_code == 0, plain.err.constData());
        const Run probed =
            run(SP_TRAINER_PATH, small({"--steps", "12", "--summary-json", dir.filePath("b.json"),
                                        "--probe-maps", maps, "--probe-out", out}));
        QVERIFY2(probed.exit_code == 0, probed.err.constData());
        // Bit for bit the same run: the probes restore the training map and leave no gradient behind.
        QCOMPARE(json_file(dir.filePath("b.json"))["eval_curve"],
                 json_file(dir.filePath("a.json"))["eval_curve"]);

        const auto probes = jsonl(out);
        QCOMPARE(probes.size(), std::size_t(3));
        QCOMPARE(probes[0]["step"].get<int>(), 0);
        QCOMPARE(probes[0]["gap_pct"].get<double>(), 0.0);  // all-BF16 against itself
        QCOMPARE(probes[0]["grad_rel_error"].get<double>(), 0.0);
        QCOMPARE(probes[0]["saving_pct"].get<double>(), 0.0);
        QCOMPARE(probes[1]["name"].get<std::string>(), std::string("int4"));
        QVERIFY(probes[1]["gap_pct"].get<double>() != 0.0);
        QVERIFY(probes[1]["grad_rel_error"].get<double>() > 0.0);
        QVERIFY(probes[1]["grad_cosine"].get<double>() < 1.0);
        QVERIFY(probes[1]["saving_pct"].get<double>() > 60.0);  // INT4: half a byte per weight plus scales
        // One block of two in an 8-bit format: about half of INT8's saving on both blocks.
        const double mixed = probes[2]["saving_pct"].get<double>();
        QVERIFY2(mixed > 20.0 && mixed < 30.0, std::to_string(mixed).c_str());
        QCOMPARE(probes[2]["step"].get<int>(), 12);
    }

    void summary_records_the_map_of_each_step() {
        QTemporaryDir dir;
        const Run r =
            run(SP_TRAINER_PATH,
                small({"--steps", "4", "--precision", "int8", "--summary-json", dir.filePath("s.json")}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto maps = json_file(dir.filePath("s.json"))["maps"];
        QCOMPARE(maps.size(), std::size_t(2));
        // Step 0 computes in the map the runtime starts with; the forced map is materialized after it.
        QCOMPARE(maps[0]["step"].get<int>(), 0);
        QCOMPARE(maps[0]["map"][0].get<std::string>(), std::string("bf16"));
        QCOMPARE(maps[1]["step"].get<int>(), 1);
        QCOMPARE(maps[1]["map"][1].get<std::string>(), std::string("int8"));
    }

    void text_parts_are_disjoint_and_named() {
        QTemporaryDir dir;
        const Run all =
            run(SP_TRAINER_PATH, small({"--steps", "0", "--summary-json", dir.filePath("all.json")}));
        const Run pre = run(SP_TRAINER_PATH, small({"--steps", "0", "--text-part", "pretrain",
                                                    "--summary-json", dir.filePath("pre.json")}));
        const Run fine = run(SP_TRAINER_PATH, small({"--steps", "0", "--text-part", "finetune",
                                                     "--summary-json", dir.filePath("fine.json")}));
        for (const Run* r : {&all, &pre, &fine}) QVERIFY2(r->exit_code == 0, r->err.constData());
        const double a = json_file(dir.filePath("all.json"))["initial_eval_loss"].get<double>();
        const double p = json_file(dir.filePath("pre.json"))["initial_eval_loss"].get<double>();
        const double f = json_file(dir.filePath("fine.json"))["initial_eval_loss"].get<double>();
        // Three held-out sets: the whole file's tail is the fine-tune part's tail, the pretrain
        // part's is other text.
        QVERIFY(p != f);
        QVERIFY(a != p);
        const Run bad = run(SP_TRAINER_PATH, small({"--steps", "0", "--text-part", "middle"}));
        QCOMPARE(bad.exit_code, 2);
        QVERIFY2(bad.err.contains("--text-part: expected all, pretrain or finetune"), bad.err.constData());
        write(dir.filePath("tiny.txt"), std::string(1000, 'x'));
        const Run tiny =
            run(SP_TRAINER_PATH,
                small({"--steps", "0", "--text", dir.filePath("tiny.txt"), "--text-part", "finetune"}));
        QCOMPARE(tiny.exit_code, 2);
        QVERIFY2(tiny.err.contains("(--text-part finetune) holds 400 bytes"), tiny.err.constData());
    }

    void bad_maps_files_exit_2_naming_the_line() {
        QTemporaryDir dir;
        const QString maps = dir.filePath("maps.jsonl"), out = dir.filePath("probes.jsonl");
        const std::pair<std::string, const char*> cases[] = {
            {"{\"step\": 0, \"name\": \"a\", \"map\": [\"bf16\"]}\n",
             "maps.jsonl:1: \"map\" must list 2 formats"},
            {"\n{\"step\": 0, \"name\": \"a\", \"map\": [\"bf16\", \"int3\"]}\n",
             "maps.jsonl:2: unknown format"},
            {"{\"step\": 9, \"name\": \"a\", \"map\": [\"bf16\", \"bf16\"]}\n", "outside 0..4"},
            {"not json\n", "maps.jsonl:1:"},
        };
        for (const auto& [text, expected] : cases) {
            write(maps, text);
            const Run r =
                run(SP_TRAINER_PATH, small({"--steps", "4", "--probe-maps", maps, "--probe-out", out}));
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains(expected), r.err.constData());
        }
        const Run alone = run(SP_TRAINER_PATH, small({"--steps", "4", "--probe-maps", maps}));
        QCOMPARE(alone.exit_code, 2);
        QVERIFY2(alone.err.contains("--probe-maps needs --probe-out"), alone.err.constData());
        const Run fifo =
            run(SP_TRAINER_PATH, small({"--steps", "4", "--probe-maps", "/dev/zero", "--probe-out", out}));
        QCOMPARE(fifo.exit_code, 2);
        QVERIFY2(fifo.err.contains("is not a regular file"), fifo.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerProbes)
#include "test_sp_trainer_probes.moc"
