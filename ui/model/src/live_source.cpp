#include "sp/ui/live_source.h"

#include <QFile>
#include <QMetaObject>
#include <QStringList>

#include <stdexcept>

#include "live_worker.h"
#include "sp/keys/curve_key_file.h"

namespace sp::ui {
namespace {

const QString kUsage = QStringLiteral(
    "expected tcp://HOST:PORT (control on PORT+1), tcp://HOST:PORT,tcp://HOST:PORT, or "
    "ipc:///PATH,ipc:///PATH");

bool fail(QString* error, const QString& text) {
    if (error) *error = text;
    return false;
}

// "tcp://host:port" -> host and port; false with `error` when it is not one.
bool splitTcp(const QString& endpoint, QString& host, int& port, QString* error) {
    const QString rest = endpoint.mid(6);
    const qsizetype colon = rest.lastIndexOf(QLatin1Char(':'));
    if (colon <= 0) return fail(error, "'" + endpoint + "': missing :PORT (" + kUsage + ")");
    host = rest.left(colon);
    bool ok = false;
    port = rest.mid(colon + 1).toInt(&ok);
    if (!ok || port < 1 || port > 65535)
        return fail(error, "'" + endpoint + "': the port must be a number in 1..65535");
    if (host == "*") return fail(error, "'" + endpoint + "': '*' is for binding; give the agent's host");
    return true;
}

bool checkEndpoint(const QString& endpoint, QString* error) {
    if (endpoint.startsWith("tcp://")) {
        QString host;
        int port = 0;
        return splitTcp(endpoint, host, port, error);
    }
    if (endpoint.startsWith("ipc://")) {
        if (endpoint.size() == 6) return fail(error, "'" + endpoint + "': missing the socket path");
        return true;
    }
    return fail(error, "'" + endpoint + "': unsupported transport (" + kUsage + ")");
}

}  // namespace

std::optional<LiveEndpoints> parseEndpointSpec(const QString& spec, QString* error) {
    const QString text = spec.trimmed();
    if (text.isEmpty()) {
        fail(error, "empty endpoint (" + kUsage + ")");
        return std::nullopt;
    }
    const QStringList parts = text.split(',');
    LiveEndpoints e;
    if (parts.size() == 1) {
        if (text.startsWith("ipc://")) {
            fail(error, "'" + text + "': ipc needs both endpoints, telemetry and control (" + kUsage + ")");
            return std::nullopt;
        }
        if (!text.startsWith("tcp://")) {
            fail(error, "'" + text + "': unsupported transport (" + kUsage + ")");
            return std::nullopt;
        }
        QString host;
        int port = 0;
        if (!splitTcp(text, host, port, error)) return std::nullopt;
        if (port == 65535) {
            fail(error, "'" + text + "': no port after 65535 for the control socket; give both endpoints");
            return std::nullopt;
        }
        e.telemetry = text;
        e.control = "tcp://" + host + ":" + QString::number(port + 1);
        return e;
    }
    if (parts.size() != 2) {
        fail(error, "'" + text + "': at most two endpoints, telemetry then control (" + kUsage + ")");
        return std::nullopt;
    }
    e.telemetry = parts[0].trimmed();
    e.control = parts[1].trimmed();
    if (!checkEndpoint(e.telemetry, error) || !checkEndpoint(e.control, error)) return std::nullopt;
    if (e.telemetry == e.control) {
        fail(error, "'" + text + "': telemetry and control must be different endpoints");
        return std::nullopt;
    }
    return e;
}

bool loadCurveKeys(const QString& server_key_file, const QString& client_key, LiveEndpoints& endpoints,
                   QString* error) {
    const auto path = [](const QString& p) { return QFile::encodeName(p).toStdString(); };
    // sp::keys, as sp-ctl and the agent: the same refusals (a secret key others may read, a public key
    // given as a secret one) in the same words.
    try {
        const std::string server = sp::keys::read_public_key(path(server_key_file));
        const sp::keys::SecretKey mine =
            sp::keys::read_secret_key(sp::keys::secret_key_path(path(client_key)));
        endpoints.server_public_key = QByteArray::fromStdString(server);
        endpoints.client_public_key = QByteArray::fromStdString(mine.public_z85);
        endpoints.client_secret_key = QByteArray::fromStdString(mine.secret_z85);
        return true;
    } catch (const std::runtime_error& e) {
        return fail(error, QString::fromStdString(e.what()));
    }
}

LiveSource::LiveSource(LiveEndpoints endpoints, LiveOptions options, QObject* parent)
    : TelemetrySource(parent), endpoints_(std::move(endpoints)), options_(options) {}

LiveSource::~LiveSource() {
    stop();
}

QString LiveSource::label() const {
    return endpoints_.telemetry;
}

void LiveSource::start() {
    if (worker_) return;
    const std::uint64_t generation = generation_;
    // Runs on the worker thread: queue the emission to this object's thread. `this` outlives the
    // worker (stop() joins it), and Qt drops queued calls to a destroyed object.
    auto post = [this, generation](LiveWorker::Emit emit_signal) {
        QMetaObject::invokeMethod(
            this,
            [this, generation, e = std::move(emit_signal)] {
                if (generation == generation_) e(*this);  // a stopped worker's leftovers are dropped
            },
            Qt::QueuedConnection);
    };
    worker_ = std::make_unique<LiveWorker>(endpoints_, options_, std::move(post));
    try {
        worker_->start();
    } catch (const std::exception& e) {
        worker_.reset();
        emit stateChanged(SourceState::disconnected, QString::fromUtf8(e.what()));
    }
}

void LiveSource::stop() {
    if (!worker_) return;
    ++generation_;
    worker_->stop();
    last_counters_ = worker_->counters();
    last_cpu_ = worker_->cpuSeconds();
    worker_.reset();
}

bool LiveSource::sendCommand(const QString& request_id, const sp::Command& command) {
    return worker_ && worker_->enqueue(request_id, command);
}

LiveCounters LiveSource::counters() const {
    return worker_ ? worker_->counters() : last_counters_;
}

double LiveSource::workerCpuSeconds() const {
    return worker_ ? worker_->cpuSeconds() : last_cpu_;
}

}  // namespace sp::ui
