#pragma once
// Window-level tests find actions the way a user does: by the text menus and toolbars show.
#include <QAction>
#include <QString>
#include <QWidget>

namespace sp::test {

// The window's action with this text ("Pin INT8"); null when none.
inline QAction* actionNamed(QWidget& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == text) return a;
    return nullptr;
}

}  // namespace sp::test
