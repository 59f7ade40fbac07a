#include "sp/ui/theme.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace sp::ui {

namespace {

QPalette darkPalette() {
    QPalette p;
    const QColor window(37, 39, 43), base(28, 30, 33), text(224, 226, 230), mid(60, 63, 68);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(34, 36, 40));
    p.setColor(QPalette::ToolTipBase, QColor(50, 53, 58));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(255, 90, 90));
    p.setColor(QPalette::Mid, mid);
    p.setColor(QPalette::Dark, QColor(20, 21, 23));
    p.setColor(QPalette::Highlight, QColor(64, 128, 200));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(110, 170, 240));
    p.setColor(QPalette::PlaceholderText, QColor(140, 143, 150));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(120, 122, 128));
    return p;
}

}  // namespace

void applyTheme(Theme theme) {
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QApplication::setPalette(theme == Theme::dark ? darkPalette() : QApplication::style()->standardPalette());
}

bool isDark(Theme theme) {
    return theme == Theme::dark;
}

QString toString(Theme theme) {
    return theme == Theme::dark ? QStringLiteral("dark") : QStringLiteral("light");
}

Theme themeFromString(const QString& s) {
    return s == QLatin1String("light") ? Theme::light : Theme::dark;
}

}  // namespace sp::ui
