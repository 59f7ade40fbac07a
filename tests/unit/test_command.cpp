// Operator commands: parsing every kind, every error with the field it names, and to_json.
#include <QtTest>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sp/command.h"

using nlohmann::json;

namespace {

// Parses `text`; returns the error (empty on success).
std::string error_of(const std::string& text, sp::Command* out = nullptr) {
    sp::Command c;
    std::string error = "stale";
    const bool ok = sp::parse_command(json::parse(text), c, error);
    if (out) *out = c;
    if (ok != error.empty())
        return "parse_command returned " + std::string(ok ? "true" : "false") + " with '" + error + "'";
    return error;
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

class TestCommand : public QObject {
    Q_OBJECT

  private slots:
    void kind_names() {
        QCOMPARE(sp::to_string(sp::Command::Kind::pin), std::string_view("pin"));
        QCOMPARE(sp::to_string(sp::Command::Kind::release), std::string_view("release"));
        QCOMPARE(sp::to_string(sp::Command::Kind::release_all), std::string_view("release_all"));
        QCOMPARE(sp::to_string(sp::Command::Kind::set_mode), std::string_view("set_mode"));
    }

    void pin() {
        sp::Command c;
        QCOMPARE(error_of(R"({"cmd":"pin","blocks":[4,3,4,0],"precision":"int8","id":17})", &c),
                 std::string());
        QVERIFY(c.kind == sp::Command::Kind::pin);
        QCOMPARE(c.blocks, (std::vector<int>{0, 3, 4}));  // sorted, duplicates removed
        QVERIFY(c.precision == sp::Precision::int8);
    }

    void pin_every_precision() {
        for (sp::Precision p : sp::kAllPrecisions) {
            sp::Command c;
            // Built as json rather than pasted into a raw string: moc mis-parses R"(...")" literals.
            const std::string text =
                json{{"cmd", "pin"}, {"blocks", {1}}, {"precision", sp::to_string(p)}}.dump();
            QCOMPARE(error_of(text, &c), std::string());
            QVERIFY(c.precision == p);
        }
    }

    void release_and_release_all() {
        sp::Command c;
        QCOMPARE(error_of(R"({"cmd":"release","blocks":[7, 2.0]})", &c), std::string());
        QVERIFY(c.kind == sp::Command::Kind::release);
        QCOMPARE(c.blocks, (std::vector<int>{2, 7}));
        // release_all takes nothing; stray fields are ignored like any other extra field.
        QCOMPARE(error_of(R"({"cmd":"release_all","blocks":"whatever","id":"a"})", &c), std::string());
        QVERIFY(c.kind == sp::Command::Kind::release_all);
        QVERIFY(c.blocks.empty());
    }

    void set_mode() {
        for (sp::Mode m : {sp::Mode::off, sp::Mode::static_, sp::Mode::dynamic}) {
            sp::Command c;
            const std::string text = json{{"cmd", "set_mode"}, {"mode", sp::to_string(m)}}.dump();
            QCOMPARE(error_of(text, &c), std::string());
            QVERIFY(c.kind == sp::Command::Kind::set_mode);
            QVERIFY(c.mode == m);
        }
    }

    void errors_data() {
        QTest::addColumn<QString>("input");
        QTest::addColumn<QStringList>("fragments");  // all must appear in the one error message
        const QString kinds = "pin, release, release_all, set_mode";
        const QString precisions = "bf16, int8, fp8_e4m3, fp8_e5m2";
        QTest::newRow("array") << "[1]" << QStringList{"JSON object", "[1]"};
        QTest::newRow("string") << "\"pin\"" << QStringList{"JSON object", "\"pin\""};
        QTest::newRow("null") << "null" << QStringList{"JSON object", "null"};
        QTest::newRow("no cmd") << "{\"blocks\":[1]}" << QStringList{"field 'cmd'", "missing", kinds};
        QTest::newRow("cmd number") << "{\"cmd\":5}"
                                    << QStringList{"field 'cmd'", "must be a string", "got 5"};
        QTest::newRow("cmd unknown") << "{\"cmd\":\"pinn\"}" << QStringList{"field 'cmd'", "\"pinn\"", kinds};
        QTest::newRow("cmd case") << "{\"cmd\":\"PIN\"}" << QStringList{"field 'cmd'", "\"PIN\"", kinds};
        QTest::newRow("pin no blocks")
            << R"({"cmd":"pin","precision":"int8"})" << QStringList{"field 'blocks'", "missing", "'pin'"};
        QTest::newRow("pin empty blocks") << R"({"cmd":"pin","blocks":[],"precision":"int8"})"
                                          << QStringList{"field 'blocks'", "non-empty", "got []"};
        QTest::newRow("blocks not array") << R"({"cmd":"pin","blocks":3,"precision":"int8"})"
                                          << QStringList{"field 'blocks'", "array", "got 3"};
        QTest::newRow("blocks negative")
            << R"({"cmd":"pin","blocks":[1,-2],"precision":"int8"})"
            << QStringList{"field 'blocks'", "element [1]", "non-negative", "got -2"};
        QTest::newRow("blocks fraction") << R"({"cmd":"release","blocks":[1.5]})"
                                         << QStringList{"field 'blocks'", "element [0]", "got 1.5"};
        QTest::newRow("blocks bool") << R"({"cmd":"release","blocks":[true]})"
                                     << QStringList{"field 'blocks'", "element [0]", "got true"};
        QTest::newRow("blocks string")
            << R"({"cmd":"release","blocks":["3"]})" << QStringList{"field 'blocks'", "got \"3\""};
        QTest::newRow("blocks too big") << R"({"cmd":"release","blocks":[3000000000]})"
                                        << QStringList{"field 'blocks'", "got 3000000000"};
        QTest::newRow("pin no precision")
            << R"({"cmd":"pin","blocks":[1]})" << QStringList{"field 'precision'", "missing", precisions};
        QTest::newRow("precision number") << R"({"cmd":"pin","blocks":[1],"precision":8})"
                                          << QStringList{"field 'precision'", "must be a string", "got 8"};
        QTest::newRow("precision unknown") << R"({"cmd":"pin","blocks":[1],"precision":"fp16"})"
                                           << QStringList{"field 'precision'", "\"fp16\"", precisions};
        QTest::newRow("for_steps zero") << R"({"cmd":"pin","blocks":[1],"precision":"int8","for_steps":0})"
                                        << QStringList{"field 'for_steps'", "positive integer", "got 0"};
        QTest::newRow("for_steps fraction")
            << R"({"cmd":"pin","blocks":[1],"precision":"int8","for_steps":2.5})"
            << QStringList{"field 'for_steps'", "got 2.5"};
        QTest::newRow("for_steps huge")
            << R"({"cmd":"pin","blocks":[1],"precision":"int8","for_steps":18446744073709551615})"
            << QStringList{"field 'for_steps'", "at most"};
        QTest::newRow("release_on_spike string")
            << R"({"cmd":"pin","blocks":[1],"precision":"int8","release_on_spike":"yes"})"
            << QStringList{"field 'release_on_spike'", "true or false", "got \"yes\""};
        QTest::newRow("release no blocks")
            << R"({"cmd":"release"})" << QStringList{"field 'blocks'", "missing", "'release'"};
        QTest::newRow("set_mode no mode")
            << R"({"cmd":"set_mode"})" << QStringList{"field 'mode'", "missing", "off, static, dynamic"};
        QTest::newRow("mode number") << R"({"cmd":"set_mode","mode":1})"
                                     << QStringList{"field 'mode'", "must be a string", "got 1"};
        QTest::newRow("mode unknown") << R"({"cmd":"set_mode","mode":"fast"})"
                                      << QStringList{"field 'mode'", "\"fast\"", "off, static, dynamic"};
    }
    void errors() {
        QFETCH(QString, input);
        QFETCH(QStringList, fragments);
        const std::string error = error_of(input.toStdString());
        QVERIFY2(!error.empty(), "accepted");
        for (const QString& f : fragments)
            QVERIFY2(contains(error, f.toStdString()),
                     qPrintable("'" + f + "' not in: " + QString::fromStdString(error)));
    }

    void set_budget_and_budget_mode() {
        sp::Command c;
        QCOMPARE(error_of(R"({"cmd":"set_budget","target_pct":62.5})", &c), std::string());
        QVERIFY(c.kind == sp::Command::Kind::set_budget);
        QCOMPARE(c.target_pct, 62.5);
        QCOMPARE(sp::to_json(c), json::parse(R"({"cmd":"set_budget","target_pct":62.5})"));
        QVERIFY(contains(error_of(R"({"cmd":"set_budget"})"), "field 'target_pct': missing"));
        QVERIFY(contains(error_of(R"({"cmd":"set_budget","target_pct":101})"), "[0, 100], got 101"));
        QVERIFY(contains(error_of(R"({"cmd":"set_budget","target_pct":"50"})"), "[0, 100], got \"50\""));
        QCOMPARE(error_of(R"({"cmd":"set_mode","mode":"budget"})", &c), std::string());
        QVERIFY(c.mode == sp::Mode::budget);
    }

    // set_tolerance takes the config key's name or its short name "pct"; both must agree.
    void set_tolerance_and_tolerance_mode() {
        sp::Command c;
        QCOMPARE(error_of(R"({"cmd":"set_tolerance","loss_tolerance_pct":0.3})", &c), std::string());
        QVERIFY(c.kind == sp::Command::Kind::set_tolerance);
        QCOMPARE(c.tolerance_pct, 0.3);
        QCOMPARE(sp::to_json(c), json::parse(R"({"cmd":"set_tolerance","loss_tolerance_pct":0.3})"));
        QCOMPARE(error_of(R"({"cmd":"set_tolerance","pct":0.25})", &c), std::string());
        QCOMPARE(c.tolerance_pct, 0.25);
        QCOMPARE(error_of(R"({"cmd":"set_tolerance","pct":0.25,"loss_tolerance_pct":0.25})"), std::string());
        QVERIFY(
            contains(error_of(R"({"cmd":"set_tolerance","pct":0.2,"loss_tolerance_pct":0.3})"), "disagree"));
        QVERIFY(contains(error_of(R"({"cmd":"set_tolerance"})"),
                         "field 'loss_tolerance_pct' (or 'pct'): missing (required by 'set_tolerance'"));
        QVERIFY(contains(error_of(R"({"cmd":"set_tolerance","pct":-1})"), "[0, 100], got -1"));
        QVERIFY(contains(error_of(R"({"cmd":"set_tolerance","pct":null})"), "[0, 100], got null"));
        QCOMPARE(error_of(R"({"cmd":"set_mode","mode":"tolerance"})", &c), std::string());
        QVERIFY(c.mode == sp::Mode::tolerance);
        QVERIFY(contains(error_of(R"({"cmd":"set_mode","mode":"cheap"})"),
                         "off, static, dynamic, budget, tolerance"));
    }

    void check_command_against_the_model() {
        sp::Command pin;
        pin.kind = sp::Command::Kind::pin;
        pin.blocks = {0, 2};
        pin.precision = sp::Precision::int4;
        QCOMPARE(sp::check_command(pin, 3, sp::kAllFormats), std::string());
        QVERIFY(contains(sp::check_command(pin, 2, sp::kAllFormats),
                         "unknown block 2 (the model has 2 blocks: 0..1)"));
        const sp::FormatMask cpu_only =
            sp::format_bit(sp::Precision::bf16) | sp::format_bit(sp::Precision::int8);
        QCOMPARE(
            sp::check_command(pin, 3, cpu_only),
            std::string(
                "precision 'int4' cannot be materialized by this trainer's runtime (it can: bf16, int8)"));
    }

    void failure_leaves_output_untouched() {
        sp::Command c;
        c.kind = sp::Command::Kind::set_mode;
        c.mode = sp::Mode::static_;
        c.blocks = {9};
        std::string error;
        QVERIFY(
            !sp::parse_command(json::parse(R"({"cmd":"pin","blocks":[1],"precision":"nope"})"), c, error));
        QVERIFY(c.kind == sp::Command::Kind::set_mode);
        QVERIFY(c.mode == sp::Mode::static_);
        QCOMPARE(c.blocks, std::vector<int>{9});
        // A later success clears the error.
        QVERIFY(sp::parse_command(json::parse(R"({"cmd":"release_all"})"), c, error));
        QVERIFY(error.empty());
    }

    void to_json_exact() {
        sp::Command pin;
        pin.kind = sp::Command::Kind::pin;
        pin.blocks = {3, 4};
        pin.precision = sp::Precision::fp8_e4m3;
        QCOMPARE(sp::to_json(pin), json::parse(R"({"cmd":"pin","blocks":[3,4],"precision":"fp8_e4m3"})"));
        sp::Command release;
        release.kind = sp::Command::Kind::release;
        release.blocks = {3};
        QCOMPARE(sp::to_json(release), json::parse(R"({"cmd":"release","blocks":[3]})"));
        sp::Command all;
        all.kind = sp::Command::Kind::release_all;
        all.blocks = {1};  // not part of release_all, so not written
        QCOMPARE(sp::to_json(all), json::parse(R"({"cmd":"release_all"})"));
        sp::Command mode;
        mode.kind = sp::Command::Kind::set_mode;
        mode.mode = sp::Mode::off;
        QCOMPARE(sp::to_json(mode), json::parse(R"({"cmd":"set_mode","mode":"off"})"));
    }

    void to_json_round_trips() {
        const char* texts[] = {
            R"({"cmd":"pin","blocks":[0,5],"precision":"int8"})",
            R"({"cmd":"pin","blocks":[2],"precision":"fp8_e5m2"})",
            R"({"cmd":"pin","blocks":[2],"precision":"int8","for_steps":200})",
            R"({"cmd":"pin","blocks":[2],"precision":"int8","release_on_spike":true})",
            R"({"cmd":"pin","blocks":[1],"precision":"bf16","for_steps":5,"release_on_spike":true})",
            R"({"cmd":"release","blocks":[1,2,3]})",
            R"({"cmd":"release_all"})",
            R"({"cmd":"set_mode","mode":"static"})"};
        for (const char* text : texts) {
            sp::Command c;
            std::string error;
            QVERIFY2(sp::parse_command(json::parse(text), c, error), error.c_str());
            QCOMPARE(sp::to_json(c), json::parse(text));
            sp::Command again;
            QVERIFY(sp::parse_command(sp::to_json(c), again, error));
            QCOMPARE(sp::to_json(again), sp::to_json(c));
        }
    }
};

QTEST_APPLESS_MAIN(TestCommand)
#include "test_command.moc"
