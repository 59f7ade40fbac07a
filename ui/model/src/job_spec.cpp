#include "sp/ui/job_spec.h"

#include <stdexcept>

#include <QSet>
#include <QStringList>

#include "sp/protocol.h"

namespace sp::ui {
namespace {

std::optional<std::vector<LiveEndpoints>> fail(QString* error, const QString& text) {
    if (error) *error = text;
    return std::nullopt;
}

// Rank r of the job whose rank 0 is `base` (ports + 2·r); nullopt with `error` when an endpoint has
// no port or runs past 65535.
std::optional<LiveEndpoints> rankOf(const LiveEndpoints& base, int rank, QString* error) {
    try {
        LiveEndpoints e = base;
        e.telemetry = QString::fromStdString(sp::protocol::rank_endpoint(base.telemetry.toStdString(), rank));
        e.control = QString::fromStdString(sp::protocol::rank_endpoint(base.control.toStdString(), rank));
        return e;
    } catch (const std::invalid_argument& e) {
        if (error)
            *error = QString::fromStdString(e.what()) +
                     QStringLiteral(" (list each rank's endpoints instead, separated by ';')");
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::vector<LiveEndpoints>> parseJobSpec(const QString& spec, int ranks, QString* error) {
    if (ranks < 0)
        return fail(error, QStringLiteral("the number of ranks must be positive, not %1").arg(ranks));
    const QStringList parts = spec.split(QLatin1Char(';'));
    std::vector<LiveEndpoints> job;
    if (parts.size() == 1) {
        std::optional<LiveEndpoints> base = parseEndpointSpec(spec, error);
        if (!base) return std::nullopt;
        job.push_back(*base);  // rank 0 is the base itself (any transport)
        for (int r = 1; r < ranks; ++r) {
            std::optional<LiveEndpoints> e = rankOf(*base, r, error);
            if (!e) return std::nullopt;
            job.push_back(std::move(*e));
        }
        return job;
    }
    if (ranks > 0 && parts.size() != ranks)
        return fail(error,
                    QStringLiteral("lists %1 ranks separated by ';', not %2").arg(parts.size()).arg(ranks));
    QSet<QString> seen;
    for (qsizetype r = 0; r < parts.size(); ++r) {
        if (parts[r].trimmed().isEmpty()) return fail(error, QStringLiteral("rank %1 is empty").arg(r));
        QString why;
        std::optional<LiveEndpoints> e = parseEndpointSpec(parts[r], &why);
        if (!e) return fail(error, QStringLiteral("rank %1: %2").arg(r).arg(why));
        for (const QString& endpoint : {e->telemetry, e->control}) {
            if (seen.contains(endpoint))
                return fail(error,
                            QStringLiteral("rank %1: '%2' is already another rank's").arg(r).arg(endpoint));
            seen.insert(endpoint);
        }
        job.push_back(std::move(*e));
    }
    return job;
}

QString jobSpecText(const std::vector<LiveEndpoints>& ranks) {
    QStringList parts;
    for (const LiveEndpoints& e : ranks) parts << e.telemetry + QLatin1Char(',') + e.control;
    return parts.join(QLatin1Char(';'));
}

}  // namespace sp::ui
