#pragma once
// Small text helpers RunSession's files share (run_session.cpp, run_session_commands.cpp): the
// records are std::string, the log is QString. Private to sp_ui_model.
#include <string>

#include <QDateTime>
#include <QString>

namespace sp::ui::session_text {

inline double nowSeconds() {
    return double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
}

inline QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

// A compact one-line rendering of an event for the log (long lines are cut).
inline QString compact(const std::string& payload) {
    QString text = qs(payload);
    if (text.size() > 200) text = text.left(197) + QStringLiteral("...");
    return text;
}

}  // namespace sp::ui::session_text
