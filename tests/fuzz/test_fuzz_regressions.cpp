// Every committed fuzz input through its target, in the ordinary (gcc, no sanitizer) build: the seed
// corpus (tests/fuzz/corpus/<target>/) and every input a fuzzer run found a bug with
// (tests/fuzz/regressions/<target>/). A target stops the process on a finding (a trap or an escaping
// exception), so this suite passes exactly when no input reproduces one. New files need no rebuild.
#include <QtTest>

#include <cstdint>

extern "C" int sp_fuzz_config(const std::uint8_t* data, std::size_t size);
extern "C" int sp_fuzz_jsonl(const std::uint8_t* data, std::size_t size);
extern "C" int sp_fuzz_protocol(const std::uint8_t* data, std::size_t size);
extern "C" int sp_fuzz_simulator(const std::uint8_t* data, std::size_t size);

namespace {

using Entry = int (*)(const std::uint8_t*, std::size_t);

const std::pair<const char*, Entry> kTargets[] = {
    {"fuzz_config", sp_fuzz_config},
    {"fuzz_jsonl", sp_fuzz_jsonl},
    {"fuzz_protocol", sp_fuzz_protocol},
    {"fuzz_simulator", sp_fuzz_simulator},
};

QString fuzz_dir() {
    return QStringLiteral(SP_SOURCE_DIR "/tests/fuzz/");
}

QStringList files_in(const QString& kind, const QString& target) {
    QDir dir(fuzz_dir() + kind + "/" + target);
    return dir.entryList(QDir::Files, QDir::Name);
}

}  // namespace

class TestFuzzRegressions : public QObject {
    Q_OBJECT

  private slots:
    void every_target_has_seeds() {
        for (const auto& [name, entry] : kTargets) {
            QVERIFY2(!files_in("corpus", name).isEmpty(), name);
        }
    }

    void inputs_data() {
        QTest::addColumn<int>("target");
        QTest::addColumn<QString>("path");
        for (int t = 0; t < int(std::size(kTargets)); ++t) {
            for (const QString& kind : {QStringLiteral("corpus"), QStringLiteral("regressions")}) {
                const QString target = kTargets[t].first;
                for (const QString& file : files_in(kind, target)) {
                    const QString path = kind + "/" + target + "/" + file;
                    QTest::newRow(qPrintable(path)) << t << path;
                }
            }
        }
    }
    void inputs() {
        QFETCH(int, target);
        QFETCH(QString, path);
        QFile file(fuzz_dir() + path);
        QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(path));
        const QByteArray data = file.readAll();
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(data.constData());
        QCOMPARE(kTargets[target].second(bytes, std::size_t(data.size())), 0);
    }
};

QTEST_APPLESS_MAIN(TestFuzzRegressions)
#include "test_fuzz_regressions.moc"
