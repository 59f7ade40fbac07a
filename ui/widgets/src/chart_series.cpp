#include "chart_series.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include <QStringList>

namespace sp::ui {

void LineSource::setSeries(const StoreSeries& s) {
    series = s;
    x = nullptr;
    y = nullptr;
    n = 0;
}

void LineSource::setSamples(const std::vector<double>& xs, const std::vector<float>& ys, std::size_t limit) {
    x = xs.data();
    y = ys.data();
    n = std::min({xs.size(), ys.size(), limit});
}

void LineSource::setComputed(const StoreSeries& s, std::vector<float> ys) {
    std::vector<double> xs(std::min(s.size(), ys.size()));
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = s.x(i);
    owned_x = std::make_shared<std::vector<double>>(std::move(xs));
    owned_y = std::make_shared<std::vector<float>>(std::move(ys));
    setSamples(*owned_x, *owned_y, owned_x->size());
}

bool LineSource::hasFiniteSample() const {
    if (!x) return series.stats(0, series.size()).count > 0;  // O(log n): from the summary
    return std::any_of(y, y + n, [](float v) { return std::isfinite(v); });
}

DecimatedSeries LineSource::draw(double x_lo, double x_hi, int columns) const {
    if (!x) return drawStoreSeries(series, x_lo, x_hi, columns, gaps);
    return decimateMinMax(x, y, n, x_lo, x_hi, columns, gaps);
}

std::vector<float> valuesOf(const StoreSeries& s) {
    std::vector<float> out(s.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = s.y(i);
    return out;
}

namespace {

QString csvField(const QString& text) {
    if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) &&
        !text.contains(QLatin1Char('\n')))
        return text;
    return QLatin1Char('"') + QString(text).replace(QLatin1String("\""), QLatin1String("\"\"")) +
           QLatin1Char('"');
}

QString csvNumber(double v) {
    return QString::number(v, 'g', 15);  // steps: whole numbers stay whole
}

// The shortest text that reads back as the same float ("0.1", not "0.100000001").
QString csvNumber(float v) {
    std::array<char, 32> text{};
    const auto end = std::to_chars(text.data(), text.data() + text.size(), v).ptr;
    return QString::fromLatin1(text.data(), int(end - text.data()));
}

}  // namespace

QString linesCsv(const std::vector<LineSource>& lines) {
    std::vector<const LineSource*> shown;
    std::vector<double> xs;
    for (const LineSource& line : lines) {
        if (!line.hasFiniteSample()) continue;
        shown.push_back(&line);
        for (std::size_t i = 0; i < line.size(); ++i)
            if (std::isfinite(line.yAt(i))) xs.push_back(line.xAt(i));
    }
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    QStringList header{QStringLiteral("step")};
    for (const LineSource* line : shown) header << csvField(line->name);
    QString out = header.join(QLatin1Char(',')) + QLatin1Char('\n');
    // One row per x: every line's value there (the last one when a line holds the x twice).
    std::vector<std::size_t> next(shown.size(), 0);
    for (double x : xs) {
        QStringList row{csvNumber(x)};
        for (std::size_t l = 0; l < shown.size(); ++l) {
            const LineSource& line = *shown[l];
            QString cell;
            std::size_t& i = next[l];
            while (i < line.size() && line.xAt(i) < x) ++i;
            for (; i < line.size() && line.xAt(i) == x; ++i)
                if (std::isfinite(line.yAt(i))) cell = csvNumber(line.yAt(i));
            row << cell;
        }
        out += row.join(QLatin1Char(',')) + QLatin1Char('\n');
    }
    return out;
}

}  // namespace sp::ui
