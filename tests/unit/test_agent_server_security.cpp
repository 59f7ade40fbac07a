// The agent's ZeroMQ server's security over real sockets: CURVE/ZAP admission of allowed keys
// only, every key-file mistake refused in words that say what to do, non-loopback endpoints that
// need CURVE or an explicit insecure, and endpoint refusal. Telemetry and control are in
// test_agent_server.cpp. Every wait is a poll loop with a deadline of seconds, never a sleep.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "../common/qtest_std_string.h"
#include "agent_server.h"
#include "agent_server_fixtures.h"
#include "sp/keys/curve_key_file.h"

using namespace std::chrono_literals;
namespace tr = sp::transport;
namespace keys = sp::keys;
using namespace sp::test::agent_server_fixtures;

namespace {

// `n` distinct free loopback ports: probes bound to port 0 and held open together (closing one
// before the next bind could hand the same port out twice), then closed.
std::vector<int> free_ports(int n) {
    zmq::context_t ctx;
    std::vector<zmq::socket_t> probes;
    std::vector<int> ports;
    for (int i = 0; i < n; ++i) {
        probes.emplace_back(ctx, zmq::socket_type::rep);
        probes.back().set(zmq::sockopt::linger, 0);
        probes.back().bind("tcp://127.0.0.1:*");
        const std::string ep = probes.back().get(zmq::sockopt::last_endpoint);
        ports.push_back(std::stoi(ep.substr(ep.rfind(':') + 1)));
    }
    return ports;
}

std::string read_whole(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

// The message of the std::runtime_error that constructing a server with `opts` throws ("" if none).
std::string refusal_of(const tr::ServerOptions& opts, tr::ServerBackend& backend) {
    try {
        tr::AgentServer server(opts, backend);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

class TestAgentServerSecurity : public QObject {
    Q_OBJECT

  private slots:
    void curve_admits_only_allowed_keys() {
        // Exceptions become failures with their message (Qt only says "unhandled exception").
        try {
            curve_body();
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
    }

    void key_file_mistakes_are_refused() {
        try {
            key_refusals_body();
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
    }

    void non_loopback_needs_curve_or_insecure() {
        try {
            non_loopback_body();
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
    }

  private:
    void curve_body() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        const std::string server_pub = keys::write_key_pair(base + "/server", keys::Replace::yes);
        keys::write_key_pair(base + "/client", keys::Replace::yes);
        keys::write_key_pair(base + "/intruder", keys::Replace::yes);
        {
            // As an operator would add a client: `cat client.pub >> allowed` (comment and labelled key).
            std::ofstream allow(base + "/allowed");
            allow << "# operators\n" << read_whole(base + "/client.pub");
        }
        QFile key(QString::fromStdString(base + "/server.key"));
        QCOMPARE(key.permissions() & (QFile::ReadGroup | QFile::ReadOther), QFile::Permissions());
        FakeBackend backend;
        tr::ServerOptions opts;
        const auto ports = free_ports(2);
        opts.telemetry_endpoint = "tcp://127.0.0.1:" + std::to_string(ports[0]);
        opts.control_endpoint = "tcp://127.0.0.1:" + std::to_string(ports[1]);
        opts.server_secret_key_file = base + "/server.key";
        opts.allowed_clients_file = base + "/allowed";
        opts.hello_interval_s = 0.1;
        opts.log = [](const std::string&) {};
        tr::AgentServer server(opts, backend);

        zmq::context_t ctx;
        auto with_keys = [&](zmq::socket_t& s, const std::string& who) {
            const keys::SecretKey mine = keys::read_secret_key(base + "/" + who + ".key");
            s.set(zmq::sockopt::linger, 0);
            s.set(zmq::sockopt::sndtimeo, 2000);
            s.set(zmq::sockopt::curve_serverkey, server_pub);
            s.set(zmq::sockopt::curve_publickey, mine.public_z85);
            s.set(zmq::sockopt::curve_secretkey, mine.secret_z85);
        };
        zmq::socket_t good(ctx, zmq::socket_type::dealer), bad(ctx, zmq::socket_type::dealer);
        with_keys(good, "client");
        with_keys(bad, "intruder");
        good.connect(opts.control_endpoint);
        bad.connect(opts.control_endpoint);
        auto pong = request(good, R"({"id":"c","cmd":"ping"})");
        QVERIFY(pong && (*pong)["ok"].get<bool>());
        QVERIFY(!request(bad, R"({"id":"x","cmd":"ping"})", 1000ms));

        zmq::socket_t good_sub(ctx, zmq::socket_type::sub), bad_sub(ctx, zmq::socket_type::sub);
        with_keys(good_sub, "client");
        with_keys(bad_sub, "intruder");
        for (auto* s : {&good_sub, &bad_sub}) {
            s->set(zmq::sockopt::subscribe, "");
            s->connect(opts.telemetry_endpoint);
        }
        QVERIFY(!wait_topic(good_sub, "hello").empty());
        QVERIFY(recv_multipart(bad_sub, 1000ms).empty());
    }

    // Each mistake an operator (or a hostile user) can make with the key files, refused in words
    // that say what to do; the same words as sp-ctl and the dashboard (sp::keys).
    void key_refusals_body() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString(), key = base + "/server.key";
        keys::write_key_pair(base + "/server", keys::Replace::yes);
        const std::string client_pub = keys::write_key_pair(base + "/client", keys::Replace::yes);
        write_text(base + "/allowed", read_whole(base + "/client.pub"));
        FakeBackend backend;
        tr::ServerOptions opts = ipc_options(dir);
        opts.allowed_clients_file = base + "/allowed";
        QCOMPARE(refusal_of(opts, backend), "agent server: allowed_clients_file '" + base +
                                                "/allowed' needs server_secret_key_file (without CURVE "
                                                "nothing checks it)");

        opts.server_secret_key_file = key;
        QCOMPARE(refusal_of(opts, backend), std::string());
        for (const mode_t open_mode : {0644, 0640, 0604, 0660}) {
            QCOMPARE(::chmod(key.c_str(), open_mode), 0);
            char octal[8];
            std::snprintf(octal, sizeof octal, "%04o", unsigned(open_mode));
            QCOMPARE(refusal_of(opts, backend), "agent server: permissions " + std::string(octal) + " for '" +
                                                    key +
                                                    "' are too open; the secret key must be readable by its "
                                                    "owner only (chmod 600 " +
                                                    key + ")");
        }
        QCOMPARE(::chmod(key.c_str(), 0400), 0);  // owner-only, read-only: fine
        QCOMPARE(refusal_of(opts, backend), std::string());
        const std::string secret = keys::read_secret_key(key).secret_z85;

        opts.server_secret_key_file = base + "/server.pub";
        QCOMPARE(refusal_of(opts, backend),
                 "agent server: CURVE key file '" + base +
                     "/server.pub' holds a public key, but a secret key is expected "
                     "here (give the NAME.key file from sp-ctl keygen, not NAME.pub)");

        // A bare key (the format before labels) could be either kind, so it is never taken as a secret.
        opts.server_secret_key_file = base + "/bare.key";
        write_text(opts.server_secret_key_file, secret + "\n");
        QCOMPARE(::chmod(opts.server_secret_key_file.c_str(), 0600), 0);
        QVERIFY2(refusal_of(opts, backend)
                         .find("holds an unlabelled key, which cannot be told from a public "
                               "key, but a secret key is expected here") != std::string::npos,
                 refusal_of(opts, backend).c_str());

        opts.server_secret_key_file = base + "/mixed.key";
        write_text(opts.server_secret_key_file,
                   "public-key = " + client_pub + "\nsecret-key = " + secret + "\n");
        QCOMPARE(::chmod(opts.server_secret_key_file.c_str(), 0600), 0);
        QCOMPARE(refusal_of(opts, backend), "agent server: CURVE key file '" + opts.server_secret_key_file +
                                                "' line 1: the public key does not belong to the secret key "
                                                "(the file was edited or mixes two pairs)");

        // A secret key pasted into the allow-list (which is world-readable) is refused, not used.
        opts.server_secret_key_file = key;
        opts.allowed_clients_file = key;
        QCOMPARE(refusal_of(opts, backend), "agent server: CURVE allow-list '" + key +
                                                "' line 3 holds a secret key, but only public keys belong "
                                                "here (NAME.pub files from sp-ctl keygen; NAME.key must stay "
                                                "private)");
    }

    void non_loopback_body() {
        FakeBackend backend;
        tr::ServerOptions opts;
        const auto ports = free_ports(2);
        opts.telemetry_endpoint = "tcp://0.0.0.0:" + std::to_string(ports[0]);
        opts.control_endpoint = "tcp://127.0.0.1:" + std::to_string(ports[1]);
        std::vector<std::string> logged;
        opts.log = [&](const std::string& m) { logged.push_back(m); };
        try {
            tr::AgentServer server(opts, backend);
            QFAIL("expected a refusal");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("CURVE") != std::string::npos, e.what());
        }
        opts.insecure = true;
        tr::AgentServer server(opts, backend);
        QCOMPARE(logged.size(), std::size_t(1));
        QVERIFY(logged[0].find(opts.telemetry_endpoint) != std::string::npos);
    }

  private slots:
    void bad_endpoint_throws() {
        FakeBackend backend;
        tr::ServerOptions opts;
        opts.telemetry_endpoint = "nonsense://x";
        try {
            tr::AgentServer server(opts, backend);
            QFAIL("expected a throw");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("nonsense://x") != std::string::npos, e.what());
        }
        opts.telemetry_endpoint = "tcp://127.0.0.1:notaport";
        opts.control_endpoint = "ipc:///nonexistent-dir/sub/ctl";
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, tr::AgentServer(opts, backend));
    }
};

QTEST_APPLESS_MAIN(TestAgentServerSecurity)
#include "test_agent_server_security.moc"
