// ChartsPanel's legends: a label under each chart naming its lines, each with a sample of its colour
// and dash. Qt Charts' own legend lays its entries out in one row and cuts every name short
// ("estim...") when a small chart has several; this one wraps between entries, so a name is always
// whole. The faint raw losses are not named (the smoothed lines' entries explain them); the overlaid
// runs are named once for all charts, in a key under the controls ("╍╍ other.jsonl": the dashed
// lines are that run's); on the sensitivity chart the policy's thresholds and hold band are named
// here rather than on the plot, where grid lines would run through their names.
#include <QLabel>
#include <QStringList>

#include "chart_box.h"
#include "chart_line.h"

namespace sp::ui {

namespace {

// A few characters drawn like the line: solid, dashed, dotted, dash-dot, dash-dot-dot.
QString sample(Qt::PenStyle style) {
    switch (style) {
        case Qt::DashLine:
            return QStringLiteral("╍╍");
        case Qt::DotLine:
            return QStringLiteral("┈┈");
        case Qt::DashDotLine:
            return QStringLiteral("━·━");
        case Qt::DashDotDotLine:
            return QStringLiteral("━··━");
        default:
            return QStringLiteral("━━");
    }
}

// One entry: the sample in the colour, then the name; non-breaking spaces and hyphens inside, so
// that the label wraps between entries, never inside one ("a-long-run.jsonl" stays on one line).
QString entry(const QString& swatch, QColor color, const QString& name) {
    const QString unbroken = name.toHtmlEscaped()
                                 .replace(QLatin1Char(' '), QStringLiteral("&nbsp;"))
                                 .replace(QLatin1Char('-'), QChar(0x2011));
    return QStringLiteral("<span style=\"color:%1\">%2</span>&nbsp;%3").arg(color.name(), swatch, unbroken);
}

}  // namespace

QString ChartsPanel::thresholdLegend() const {
    QStringList entries;
    const std::vector<Threshold> t = thresholds();
    for (std::size_t i = 0; i < t.size() && i < kGuideColors.size(); ++i)
        entries << entry(sample(i == 2 ? Qt::DotLine : Qt::DashLine), QColor::fromRgb(kGuideColors[i]),
                         t[i].name);
    if (holdBand()) entries << entry(QStringLiteral("██"), QColor(0x99, 0x99, 0x99, 0x60), tr("hold band"));
    return entries.join(QStringLiteral(" &nbsp; "));
}

void ChartsPanel::updateLegend(Chart which, const std::vector<LineSource>& sources) {
    ChartBox& box = *charts_[std::size_t(which)];
    QStringList entries;
    for (std::size_t i = 0; i < sources.size() && i < box.lines.size(); ++i) {
        const LineSource& s = sources[i];
        if (!box.lines[i]->visible()) continue;
        if (s.legend == LegendEntry::own) entries << entry(sample(s.style), s.color, s.name);
    }
    QString text = entries.join(QStringLiteral(" &nbsp; "));
    if (which == Chart::sensitivity) {
        const QString guides = thresholdLegend();
        if (!guides.isEmpty()) text += (text.isEmpty() ? QString() : QStringLiteral(" &nbsp; ")) + guides;
    }
    if (box.legend->text() != text) box.legend->setText(text);
    box.legend->setVisible(!text.isEmpty());
}

void ChartsPanel::updateRunsKey() {
    QStringList entries;
    const QColor ink = dark_ ? QColor(0xd8, 0xd8, 0xd8) : QColor(0x30, 0x30, 0x30);
    for (std::size_t i = 0; i < overlay_runs_.size(); ++i)
        entries << entry(sample(kRunStyles[i % kRunStyles.size()]), ink, overlay_runs_[i].name);
    runs_key_->setText(entries.isEmpty() ? QString()
                                         : tr("Other runs, in their dash:") + QStringLiteral(" ") +
                                               entries.join(QStringLiteral(" &nbsp; ")));
    runs_key_->setVisible(!entries.isEmpty());
}

}  // namespace sp::ui
