#pragma once
// Saving what the dashboard shows: a table as CSV (what the model displays, header included),
// images as PNG and a run's event log as CSV. Each returns an empty string on success, else a
// message naming the file.
#include <QString>

class QAbstractItemModel;
class QImage;

namespace sp::ui {

class EventLog;

QString exportCsv(const QAbstractItemModel& model, const QString& path);
QString exportPng(const QImage& image, const QString& path);
// The whole log, oldest first, one entry a line under the header `kEventLogCsvHeader`: step (empty
// when the entry has none), time (ISO 8601 in UTC with milliseconds, what pandas and spreadsheets
// read; empty when unknown), kind (the log's category), state (a command's pending / applied /
// rejected), text (the line the log shows) and detail (the payload, evidence or reason).
QString exportEventLogCsv(const EventLog& log, const QString& path);
inline constexpr char kEventLogCsvHeader[] = "step,time,kind,state,text,detail";

// One CSV field: quoted when it holds a comma, quote or line break (RFC 4180).
QString csvField(const QString& text);

}  // namespace sp::ui
