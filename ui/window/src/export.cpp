#include "sp/ui/export.h"

#include <QAbstractItemModel>
#include <QDateTime>
#include <QFile>
#include <QImage>
#include <QSaveFile>
#include <QTextStream>

#include "sp/ui/event_log.h"

namespace sp::ui {

QString csvField(const QString& text) {
    if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) &&
        !text.contains(QLatin1Char('\n')) && !text.contains(QLatin1Char('\r')))
        return text;
    QString quoted = text;
    quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

QString exportCsv(const QAbstractItemModel& model, const QString& path) {
    QSaveFile file(path);  // all or nothing: a failed export never leaves half a file
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
        return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    QTextStream out(&file);
    const int columns = model.columnCount();
    for (int c = 0; c < columns; ++c)
        out << (c ? "," : "") << csvField(model.headerData(c, Qt::Horizontal).toString());
    out << '\n';
    for (int r = 0; r < model.rowCount(); ++r) {
        for (int c = 0; c < columns; ++c)
            out << (c ? "," : "") << csvField(model.index(r, c).data().toString());
        out << '\n';
    }
    out.flush();
    if (!file.commit()) return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    return {};
}

QString exportPng(const QImage& image, const QString& path) {
    if (image.isNull()) return QObject::tr("Nothing to export to %1").arg(path);
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    if (!image.save(&file, "PNG")) return QObject::tr("Cannot encode %1 as PNG").arg(path);
    if (!file.commit()) return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    return {};
}

QString exportEventLogCsv(const EventLog& log, const QString& path) {
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
        return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    QTextStream out(&file);
    out << kEventLogCsvHeader << '\n';
    for (std::size_t i = 0; i < log.size(); ++i) {
        const EventEntry& e = log.at(i);
        const QString step = e.step >= 0 ? QString::number(e.step) : QString();
        const QString time = e.timestamp > 0
                                 ? QDateTime::fromMSecsSinceEpoch(qint64(e.timestamp * 1000.0), Qt::UTC)
                                       .toString(Qt::ISODateWithMs)
                                 : QString();
        out << step << ',' << time << ',' << csvField(toString(e.category)) << ','
            << csvField(toString(e.state)) << ',' << csvField(e.text) << ',' << csvField(e.detail) << '\n';
    }
    out.flush();
    if (!file.commit()) return QObject::tr("Cannot write %1: %2").arg(path, file.errorString());
    return {};
}

}  // namespace sp::ui
