// sp::keys on its own (no agent, no sockets): the key file format keygen writes and every reader
// accepts, the modes whatever the umask, the allow-list's lines, and the refusals' wording.
#include <QtTest>

#include <QFileInfo>
#include <QTemporaryDir>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "../common/fifo_read.h"
#include "../common/qtest_std_string.h"
#include "sp/keys/curve_key_file.h"

namespace keys = sp::keys;

namespace {

int mode_of(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? int(st.st_mode & 07777) : -1;
}

template <typename F>
std::string refusal_of(F f) {
    try {
        f();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

class TestCurveKeys : public QObject {
    Q_OBJECT
  private slots:
    void pair_round_trips_with_exact_modes_whatever_the_umask() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        for (const mode_t mask : {mode_t(0), mode_t(022), mode_t(077)}) {
            const mode_t old = ::umask(mask);
            const std::string name = base + "/k" + std::to_string(mask);
            const std::string pub = keys::write_key_pair(name, keys::Replace::no);
            ::umask(old);
            QCOMPARE(mode_of(name + ".key"), 0600);
            QCOMPARE(mode_of(name + ".pub"), 0644);
            QCOMPARE(keys::read_public_key(name + ".pub"), pub);
            const keys::SecretKey secret = keys::read_secret_key(name + ".key");
            QCOMPARE(secret.public_z85, pub);
            QCOMPARE(secret.secret_z85.size(), std::size_t(40));
        }
    }

    void allow_list_takes_labelled_and_bare_keys_and_comments() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        const std::string a = keys::write_key_pair(base + "/a", keys::Replace::no);
        const std::string b = keys::write_key_pair(base + "/b", keys::Replace::no);
        std::ofstream(base + "/allowed") << "# operators\n\n"
                                         << "public-key=" << a << "\r\n  " << b << "  \n# end\n";
        QCOMPARE(keys::read_allow_list(base + "/allowed"), (std::vector<std::string>{a, b}));
        std::ofstream(base + "/allowed") << a << "\nnot a key\n";
        QCOMPARE(refusal_of([&] { keys::read_allow_list(base + "/allowed"); }),
                 "CURVE allow-list '" + base +
                     "/allowed' line 2: not a key ('public-key = KEY', 'secret-key = "
                     "KEY' or a bare 40-character Z85 key) nor a comment ('#')");
    }

    void too_open_secret_is_refused_like_ssh() {
        QTemporaryDir dir;
        const std::string key = dir.path().toStdString() + "/k.key";
        keys::write_key_pair(dir.path().toStdString() + "/k", keys::Replace::no);
        QCOMPARE(::chmod(key.c_str(), 0620), 0);  // group-writable: the group could swap the key
        QCOMPARE(refusal_of([&] { keys::read_secret_key(key); }),
                 "permissions 0620 for '" + key +
                     "' are too open; the secret key must be readable by its owner only (chmod 600 " + key +
                     ")");
        QCOMPARE(refusal_of([&] { keys::read_public_key(dir.path().toStdString() + "/k.pub"); }),
                 std::string());
    }

    void secret_key_path_adds_key_to_a_bare_name() {
        QCOMPARE(keys::secret_key_path("me"), std::string("me.key"));
        QCOMPARE(keys::secret_key_path("me.key"), std::string("me.key"));
        QCOMPARE(keys::secret_key_path("me.pub"), std::string("me.pub"));  // then refused as public
    }

    void no_force_refuses_a_dangling_symlink_and_creates_nothing() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        QCOMPARE(::symlink((base + "/planted").c_str(), (base + "/k.pub").c_str()), 0);
        QCOMPARE(refusal_of([&] { keys::write_key_pair(base + "/k", keys::Replace::no); }),
                 "'" + base + "/k.pub' exists; not overwriting it (use --force)");
        QCOMPARE(mode_of(base + "/planted"), -1);
        QCOMPARE(mode_of(base + "/k.key"), -1);  // both checked before either is written
        keys::write_key_pair(base + "/k", keys::Replace::yes);
        QCOMPARE(mode_of(base + "/planted"), -1);
        QVERIFY(!QFileInfo(QString::fromStdString(base + "/k.pub")).isSymLink());
    }

    // A FIFO given as a key file or allow-list used to block open() until a writer came: sp-trainer
    // hung at start, silent. It is refused as "not a regular file" without waiting.
    void a_fifo_is_refused_without_waiting_for_a_writer() {
        QTemporaryDir dir;
        const std::string fifo = dir.filePath("key.fifo").toStdString();
        QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
        const auto secret = sp::test::read_fifo_without_writer(fifo, [&] { keys::read_secret_key(fifo); });
        QVERIFY2(!secret.blocked, "read_secret_key waited for a writer of the FIFO");
        QCOMPARE(secret.refusal, "cannot read CURVE key file '" + fifo + "': not a regular file");
        const auto allowed = sp::test::read_fifo_without_writer(fifo, [&] { keys::read_allow_list(fifo); });
        QVERIFY2(!allowed.blocked, "read_allow_list waited for a writer of the FIFO");
        QCOMPARE(allowed.refusal, "cannot read CURVE allow-list '" + fifo + "': not a regular file");
    }
};

QTEST_APPLESS_MAIN(TestCurveKeys)
#include "test_curve_keys.moc"
