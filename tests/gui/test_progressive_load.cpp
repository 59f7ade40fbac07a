// Progressive load: the window shows a file's first update while the rest is still being read, and
// once loaded shows what a load of the whole file at once shows. The file is a FIFO a writer thread
// fills but for its last line, which it holds back until the test has seen the first update: "while
// the rest is being read" is a fact of the test, not a race.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <future>
#include <thread>

#include <QFile>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "dashboard_fixture.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/event_log.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

using sp::ui::MainWindow;
using sp::ui::RunSession;
using sp::ui::SourceState;

namespace {

bool writeAll(int fd, const QByteArray& bytes) {
    qsizetype done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.constData() + done, std::size_t(bytes.size() - done));
        if (n <= 0) return false;
        done += n;
    }
    return true;
}

// Writes `head` into the FIFO, then `tail` once told to go (or nothing more when let go), and closes.
class FifoWriter {
  public:
    FifoWriter(const QString& fifo, QByteArray head, QByteArray tail)
        : thread_([this, path = fifo.toLocal8Bit(), head = std::move(head), tail = std::move(tail)] {
              const int fd = ::open(path.constData(), O_WRONLY);  // meets the loader's open
              if (fd < 0) return;
              bool ok = writeAll(fd, head);
              if (ok && go_.get_future().get()) ok = writeAll(fd, tail);
              ::close(fd);
          }) {}
    ~FifoWriter() {
        release(false);
        thread_.join();
    }
    void release(bool write_tail) {
        if (!released_) go_.set_value(write_tail);
        released_ = true;
    }

  private:
    std::promise<bool> go_;
    bool released_ = false;
    std::thread thread_;
};

QStringList tableText(const MainWindow& w) {
    const QAbstractItemModel* table = w.findChild<sp::ui::BlockTablePanel*>()->view()->model();
    QStringList cells;
    for (int r = 0; r < table->rowCount(); ++r)
        for (int c = 0; c < table->columnCount(); ++c) cells << table->index(r, c).data().toString();
    return cells;
}

// The log without the dashboard's own connection entries (they name the file and the load time).
QStringList logText(const RunSession& s) {
    QStringList out;
    for (std::size_t i = 0; i < s.events().size(); ++i)
        if (s.events().at(i).category != sp::ui::EventCategory::connection)
            out << QStringLiteral("%1 %2").arg(s.events().at(i).step).arg(s.events().at(i).text);
    return out;
}

}  // namespace

class TestProgressiveLoad : public QObject {
    Q_OBJECT
  private slots:
    void theFirstUpdateShowsBeforeTheLoadEnds() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString whole = dir.filePath(QStringLiteral("whole.jsonl"));
        // Several megabytes, more than the reader takes at a time.
        sp::test::writeDashboardFixture(whole.toStdString(), 64, 1500);
        QFile file(whole);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray bytes = file.readAll();
        QVERIFY(bytes.size() > (4 << 20));
        const qsizetype last_line = bytes.lastIndexOf('\n', bytes.size() - 2) + 1;
        const QString fifo = dir.filePath(QStringLiteral("stream.jsonl"));
        QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);

        MainWindow streaming;
        streaming.resize(MainWindow::kDefaultSize);
        streaming.show();
        streaming.openFile(fifo);
        RunSession* s = streaming.currentSession();
        QSignalSpy appended(s, &RunSession::updatesAppended);
        QSignalSpy finished(s, &RunSession::loadFinished);
        FifoWriter writer(fifo, bytes.left(last_line), bytes.mid(last_line));
        QVERIFY(appended.wait());
        QVERIFY(s->state() == SourceState::loading);
        QCOMPARE(finished.count(), 0);
        // The first update came alone, at once (more may have followed in the same turn of the loop).
        QCOMPARE(appended.first().at(0).value<std::size_t>(), std::size_t(0));
        QCOMPARE(appended.first().at(1).value<std::size_t>(), std::size_t(1));
        QVERIFY(s->store().updateCount() < 1500);
        streaming.refreshViews();  // what the repaint timer does
        QCOMPARE(streaming.findChild<sp::ui::BlockTablePanel*>()->view()->model()->rowCount(), 64);
        QVERIFY(!streaming.findChild<sp::ui::HeatmapView*>()->grab().isNull());

        writer.release(true);
        QVERIFY(finished.wait());
        QVERIFY(s->state() == SourceState::loaded);

        MainWindow at_once;
        at_once.resize(MainWindow::kDefaultSize);
        at_once.show();
        at_once.openFile(whole);
        RunSession* t = at_once.currentSession();
        QTRY_VERIFY(t->state() == SourceState::loaded);
        streaming.refreshViews();
        at_once.refreshViews();
        QCOMPARE(s->store().updateCount(), t->store().updateCount());
        QCOMPARE(s->store().blockCount(), t->store().blockCount());
        for (int b = 0; b < t->store().blockCount(); ++b) {
            for (int f = 0; f < sp::ui::kBlockFieldCount; ++f) {  // bit for bit, NaN for NaN
                for (std::size_t u = 0; u < t->store().updateCount(); ++u) {
                    const float x = s->store().value(b, u, sp::ui::BlockField(f));
                    const float y = t->store().value(b, u, sp::ui::BlockField(f));
                    QVERIFY(std::memcmp(&x, &y, sizeof(float)) == 0);
                }
            }
            for (std::size_t u = 0; u < t->store().updateCount(); ++u) {
                const sp::ui::BlockCell x = s->store().cell(b, u), y = t->store().cell(b, u);
                QVERIFY(x.present == y.present && x.precision == y.precision && x.forced == y.forced &&
                        x.changed == y.changed && x.reason == y.reason);
            }
        }
        QCOMPARE(tableText(streaming), tableText(at_once));
        QCOMPARE(logText(*s), logText(*t));
        QCOMPARE(streaming.findChild<sp::ui::HeatmapView*>()->grab().toImage(),
                 at_once.findChild<sp::ui::HeatmapView*>()->grab().toImage());
    }
};

QTEST_MAIN(TestProgressiveLoad)
#include "test_progressive_load.moc"
