// JSON files at the edge of the process (issue 30): what reading refuses (a FIFO, a device, a file
// over 16 MiB: sp::read_json_file under load_config_file; a key given twice: sp::parse_json when
// asked, and every config), and that the telemetry writer never writes through a symlink.
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <sys/stat.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/fifo_read.h"
#include "../common/qtest_std_string.h"
#include "sp/config.h"
#include "sp/format_gate.h"
#include "sp/json_input.h"
#include "sp/jsonl.h"

namespace {

std::vector<std::string> config_problems(const std::string& text) {
    try {
        sp::parse_config(text);
    } catch (const sp::ConfigError& e) {
        return e.problems();
    }
    return {};
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

class TestJsonFiles : public QObject {
    Q_OBJECT
  private slots:
    // Which of two values wins is invisible in the file (nlohmann keeps the last; others the first):
    // a config that gives a key twice is refused, naming the key and where the second one is.
    void config_key_given_twice_is_an_error_naming_it() {
        auto ps = config_problems("{\"warmup_steps\": 5,\n \"warmup_steps\": 50}");
        QCOMPARE(ps.size(), std::size_t(1));
        QCOMPARE(ps[0], std::string("key 'warmup_steps': given more than once in the same object (line 2, "
                                    "column 2); give each key once"));
        ps = config_problems(R"({"selective_precision": {"mode": "static", "mode": "dynamic"}})");
        QCOMPARE(ps.size(), std::size_t(1));
        QCOMPARE(ps[0], std::string("key 'selective_precision.mode': given more than once in the same object "
                                    "(column 44); give each key once"));
        // The wrapper too: two selective_precision objects are two configs.
        ps = config_problems(R"({"selective_precision": {}, "selective_precision": {"mode": "off"}})");
        QCOMPARE(ps.size(), std::size_t(1));
        QVERIFY(ps[0].find("key 'selective_precision': given more than once") == 0);
        // The same key in different objects is no duplicate.
        QVERIFY(config_problems(R"({"memory": {"stagehand": {"selective_precision": {"mode": "off"}},)"
                                R"( "mode": 1}})")
                    .empty());

        QTemporaryDir dir;
        const std::string path = dir.filePath("cfg.json").toStdString();
        std::ofstream(path) << R"({"enabled": true, "enabled": false})";
        try {
            sp::load_config_file(path);
            QFAIL("accepted");
        } catch (const sp::ConfigError& e) {
            QCOMPARE(e.problems().at(0), path +
                                             ": key 'enabled': given more than once in the same object "
                                             "(column 19); give each key once");
        }
    }

    // nlohmann's lexer took a NUL for the end of the input: `{"mode":"off"}\0{"mode":"budget"}` ran in
    // mode off, and a leading NUL read as "unexpected end of input". A NUL anywhere is an error at its
    // byte offset, in configs and gate policies, from text and from files.
    void a_nul_byte_is_an_error_naming_its_offset() {
        using namespace std::string_literals;
        const std::vector<std::pair<std::string, std::string>> configs = {
            {"{\"mode\":\"off\"}\0{\"mode\":\"budget\"}"s, "column 15: a NUL byte at byte offset 14"},
            {"\0{\"mode\":\"off\"}"s, "column 1: a NUL byte at byte offset 0"},
            {"{\"mode\":\"of\0f\"}"s, "column 12, key 'mode': a NUL byte at byte offset 11"},
            {"{\"mode\":\n \"off\"}\n\0"s, "line 3, column 1: a NUL byte at byte offset 17"},
        };
        const std::string rest = " (JSON text never holds one)";
        QTemporaryDir dir;
        const std::string path = dir.filePath("cfg.json").toStdString();
        for (const auto& [text, where] : configs) {
            QCOMPARE(config_problems(text), std::vector<std::string>{"not valid JSON: " + where + rest});
            std::ofstream(path, std::ios::binary) << text;
            try {
                sp::load_config_file(path);
                QFAIL("accepted");
            } catch (const sp::ConfigError& e) {
                QCOMPARE(e.problems(), std::vector<std::string>{path + ": not valid JSON: " + where + rest});
            }
        }
        // An error before the NUL is reported as itself.
        QCOMPARE(config_problems("{\"mode\":,}\0"s)
                     .at(0)
                     .find("not valid JSON: column 9, key 'mode': syntax error"),
                 std::size_t(0));

        const std::string policy = sp::to_json_text(sp::FormatGatePolicy{});
        const std::string gate_path = dir.filePath("gate.json").toStdString();
        std::ofstream(gate_path, std::ios::binary) << policy + '\0' + policy;
        try {
            sp::load_gate_policy(gate_path);
            QFAIL("accepted");
        } catch (const sp::GatePolicyError& e) {
            const std::size_t offset = policy.size();
            QCOMPARE(e.problems().size(), std::size_t(1));
            QVERIFY2(e.problems()[0].find(gate_path + ": not valid JSON: line ") == 0 &&
                         e.problems()[0].find(": a NUL byte at byte offset " + std::to_string(offset) +
                                              rest) != std::string::npos,
                     e.problems()[0].c_str());
        }
        try {
            sp::parse_gate_policy("\0"s + policy);
            QFAIL("accepted");
        } catch (const sp::GatePolicyError& e) {
            QCOMPARE(e.problems().at(0),
                     "not valid JSON: line 1, column 1: a NUL byte at byte offset 0" + rest);
        }
    }

    // Off by default (telemetry and protocol readers are unaffected); located at the second key.
    void parse_json_refuses_a_key_given_twice_only_when_asked() {
        const std::string text = "{\"a\": {\"b\": 1, \"c\": [\"b\", {\"b\": 2}],\n  \"b\": 3}}";
        nlohmann::json j;
        sp::JsonError error;
        QVERIFY(sp::parse_json(text, j, error));
        QCOMPARE(j["a"]["b"].get<int>(), 3);
        sp::JsonLimits limits;
        limits.reject_duplicate_keys = true;
        QVERIFY(!sp::parse_json(text, j, error, limits));
        QVERIFY(j.is_discarded());
        QCOMPARE(int(error.kind), int(sp::JsonError::Kind::duplicate_key));
        QCOMPARE(error.path, std::string("a.b"));
        QCOMPARE(error.line, std::size_t(2));
        QCOMPARE(error.column, std::size_t(3));
        QCOMPARE(
            error.message(),
            std::string("line 2, column 3, key 'a.b': the key appears more than once in the same object"));
        // Escapes are decoded before comparing: "\u0062" is "b".
        nlohmann::ordered_json o;
        QVERIFY(!sp::parse_json(R"({"b": 1, "\u0062": 2})", o, error, limits));
        QCOMPARE(error.column, std::size_t(10));
    }

    // A FIFO used to block the reader until a writer came, /dev/zero to grow it without end (not
    // tried: before the fix it would): only a regular file of at most 16 MiB is read.
    void config_file_that_is_not_a_regular_file_or_too_large_is_refused() {
        QTemporaryDir dir;
        const std::string fifo = dir.filePath("cfg.fifo").toStdString();
        QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
        const auto read = sp::test::read_fifo_without_writer(fifo, [&] { sp::load_config_file(fifo); });
        QVERIFY2(!read.blocked, "load_config_file waited for a writer of the FIFO");
        QCOMPARE(read.refusal, "invalid Selective Precision config:\n  " + fifo +
                                   ": cannot read the file (not a regular file: a FIFO)");
        const std::string big = dir.filePath("big.json").toStdString();
        {
            QFile f(QString::fromStdString(big));
            QVERIFY(f.open(QIODevice::WriteOnly) && f.resize((qint64(16) << 20) + 1));  // sparse
        }
        const std::pair<std::string, std::string> cases[] = {
            {"/dev/null", "not a regular file: a character device"},
            {big, "larger than 16 MiB (the limit for a JSON document)"},
            {dir.path().toStdString(), "a directory"},
            {dir.filePath("none.json").toStdString(), "No such file or directory"}};
        for (const auto& [path, why] : cases) {
            try {
                sp::load_config_file(path);
                QFAIL(qPrintable(QString::fromStdString(path + " accepted")));
            } catch (const sp::ConfigError& e) {
                QCOMPARE(e.problems().at(0), path + ": cannot read the file (" + why + ")");
            }
        }
        // A file exactly at the limit is read (and then judged as JSON).
        std::string text;
        std::string problem;
        {
            QFile f(QString::fromStdString(big));
            QVERIFY(f.resize(qint64(16) << 20));
        }
        QVERIFY2(sp::read_json_file(big, text, problem), problem.c_str());
        QCOMPARE(text.size(), std::size_t(16) << 20);
    }

    // A symlink at the telemetry path would have its target truncated, a dangling one its target
    // created: both are refused (O_NOFOLLOW), in either open mode.
    void telemetry_writer_never_writes_through_a_symlink() {
        QTemporaryDir dir;
        const std::string victim = dir.filePath("victim").toStdString(),
                          link = dir.filePath("run.jsonl").toStdString(),
                          dangling = dir.filePath("dangling.jsonl").toStdString(),
                          nowhere = dir.filePath("nowhere").toStdString();
        std::ofstream(victim) << "someone else's file\n";
        QCOMPARE(::symlink(victim.c_str(), link.c_str()), 0);
        QCOMPARE(::symlink(nowhere.c_str(), dangling.c_str()), 0);
        for (const std::string& path : {link, dangling}) {
            for (auto mode : {sp::JsonlWriter::OpenMode::truncate, sp::JsonlWriter::OpenMode::append}) {
                try {
                    sp::JsonlWriter writer(path, mode);
                    writer.write_line("{}");
                    QFAIL(qPrintable(QString::fromStdString("wrote through the symlink " + path)));
                } catch (const std::runtime_error& e) {
                    QCOMPARE(std::string(e.what()),
                             "cannot open telemetry file '" + path +
                                 "' for writing: it is a symbolic link, and telemetry is never written "
                                 "through one (give the file itself)");
                }
            }
        }
        QCOMPARE(read_all(victim), std::string("someone else's file\n"));
        struct stat st {};
        QCOMPARE(::lstat(nowhere.c_str(), &st), -1);
    }
};

QTEST_APPLESS_MAIN(TestJsonFiles)
#include "test_json_files.moc"
