#include "chart_series.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <QStringList>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

void RunColumns::clear() {
    steps.clear();
    eval_steps.clear();
    for (auto* column : floatColumns()) column->clear();
}

bool RunColumns::syncWith(const TelemetryStore& store) {
    const std::size_t n = store.updateCount();
    const bool restarted = steps.size() > n || (!steps.empty() && store.row(0).timestamp != first_timestamp_);
    if (restarted) clear();
    if (steps.empty() && n > 0) first_timestamp_ = store.row(0).timestamp;
    for (std::size_t u = steps.size(); u < n; ++u) {
        const UpdateRow& r = store.row(u);
        steps.push_back(double(r.step));
        estimated.push_back(r.estimated_saving_pct);
        measured.push_back(r.measured_saving_pct);
        target.push_back(r.budget_target_pct);
        bf16.push_back(float(r.blocks_bf16));
        int8.push_back(float(r.blocks_int8));
        fp8.push_back(float(r.blocks_fp8));
        int4.push_back(float(r.blocks_int4));
        train_loss.push_back(r.train_loss);
        eval_loss.push_back(r.eval_loss);
        eval_steps.push_back(double(r.eval_step));
    }
    return restarted;
}

void LineSource::setSamples(const std::vector<double>& xs, const std::vector<float>& ys, std::size_t limit) {
    x = xs.data();
    y = ys.data();
    n = std::min({xs.size(), ys.size(), limit});
}

void LineSource::setOwnedSamples(const std::vector<double>& xs, std::vector<float> ys) {
    owned = std::make_shared<std::vector<float>>(std::move(ys));
    setSamples(xs, *owned, owned->size());
}

void LineSource::setDecodedSamples(const std::vector<double>& xs, const FieldSeries& ys, std::size_t limit) {
    const std::size_t count = std::min({xs.size(), ys.size(), limit});
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = ys[i];
    setOwnedSamples(xs, std::move(values));
}

bool LineSource::hasFiniteSample() const {
    return std::any_of(y, y + n, [](float v) { return std::isfinite(v); });
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
        for (std::size_t i = 0; i < line.n; ++i)
            if (std::isfinite(line.y[i])) xs.push_back(line.x[i]);
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
            while (i < line.n && line.x[i] < x) ++i;
            for (; i < line.n && line.x[i] == x; ++i)
                if (std::isfinite(line.y[i])) cell = csvNumber(line.y[i]);
            row << cell;
        }
        out += row.join(QLatin1Char(',')) + QLatin1Char('\n');
    }
    return out;
}

}  // namespace sp::ui
