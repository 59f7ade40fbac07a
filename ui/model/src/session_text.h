#pragma once
// Small text helpers RunSession's files share (run_session.cpp, run_session_commands.cpp): event
// payloads are JSON, the log is QString. Private to sp_ui_model.
#include <string>

#include <QDateTime>
#include <QString>
#include <nlohmann/json.hpp>

namespace sp::ui::session_text {

inline double nowSeconds() {
    return double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
}

inline QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

inline QString jsonString(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return QString();
    return it->is_string() ? qs(it->get<std::string>()) : qs(it->dump());
}

// A compact one-line rendering of a payload for the log (long payloads are cut).
inline QString compact(const std::string& payload) {
    QString text = qs(payload);
    if (text.size() > 200) text = text.left(197) + QStringLiteral("...");
    return text;
}

}  // namespace sp::ui::session_text
