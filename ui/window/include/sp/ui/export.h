#pragma once
// Saving what the dashboard shows: a table as CSV (what the model displays, header included)
// and images as PNG. Each returns an empty string on success, else a message naming the file.
#include <QString>

class QAbstractItemModel;
class QImage;

namespace sp::ui {

QString exportCsv(const QAbstractItemModel& model, const QString& path);
QString exportPng(const QImage& image, const QString& path);

// One CSV field: quoted when it holds a comma, quote or line break (RFC 4180).
QString csvField(const QString& text);

}  // namespace sp::ui
