#pragma once
// Dark and light palettes on the Fusion style: the same look on every platform (and offscreen).
#include <QString>

class QApplication;

namespace sp::ui {

enum class Theme { dark, light };

void applyTheme(Theme theme);
bool isDark(Theme theme);
QString toString(Theme theme);            // "dark" / "light"
Theme themeFromString(const QString& s);  // anything but "light" is dark

}  // namespace sp::ui
