// Heatmap and charts drawing cost on a large run, against a same-process baseline.
//
//   bench_heatmap [--blocks N] [--updates N] [--repaints N] [--png DIR]
//
// A store of 1,000 blocks x 10,000 updates (filled directly, no source), a HeatmapView of 1600x1000
// at full zoom-out. Reports median and p95 of: a repaint with nothing changed (cached grid), a repaint
// after the grid cache was dropped (one update appended: column write + resample + paint; fitted to
// the width, the zoom moves about once per pixel column's worth of updates, so the median is an
// append that changes one pixel column and the p95 one that rescales them all), the same following
// at 1.5x the fitted zoom (a whole number of updates per pixel: the view moves one pixel column every
// few appends), the append+refresh cost per update, the export renderToImage; and the charts'
// refresh for the same run. Baseline: QPainter::drawImage of an already-scaled image of the same
// size (the least a repaint can cost). Ratios are what to compare across machines; milliseconds only
// within one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <QApplication>
#include <QDir>
#include <QPainter>

#include "sp/ui/charts_panel.h"
#include "sp/ui/colormap.h"
#include "sp/ui/heatmap_legend.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/telemetry_store.h"

using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
    double median = 0.0;
    double p95 = 0.0;
    double max = 0.0;
    double cpu_median = 0.0;  // this thread's CPU time: less disturbed by other load on the machine
};

double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

Stats stats(std::vector<double> ms, std::vector<double> cpu) {
    std::sort(ms.begin(), ms.end());
    std::sort(cpu.begin(), cpu.end());
    Stats s;
    if (ms.empty()) return s;
    s.cpu_median = cpu[cpu.size() / 2];
    s.median = ms[ms.size() / 2];
    s.p95 = ms[std::min(ms.size() - 1, std::size_t(std::ceil(0.95 * double(ms.size()))) - 1)];
    s.max = ms.back();
    return s;
}

Stats time_it(int runs, const std::function<void()>& fn, const std::function<void()>& before = {}) {
    std::vector<double> ms, cpu;
    for (int i = 0; i < runs; ++i) {
        if (before) before();
        const double c0 = thread_cpu_ms();
        const auto t0 = Clock::now();
        fn();
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        cpu.push_back(thread_cpu_ms() - c0);
    }
    return stats(ms, cpu);
}

// Ratios use the CPU-time medians (the wall-clock ones move with other load on a shared machine).
void print(const char* what, const Stats& s, const Stats& baseline) {
    std::printf("%-48s wall median %7.3f p95 %7.3f max %7.3f ms | cpu median %7.3f ms (x%.1f baseline)\n",
                what, s.median, s.p95, s.max, s.cpu_median,
                baseline.cpu_median > 0 ? s.cpu_median / baseline.cpu_median : 0.0);
}

// A run-like record: sensitivities drifting per block, a few INT8/FP8 blocks, some pins.
class RecordMaker {
  public:
    explicit RecordMaker(int blocks) : blocks_(blocks), rng_(42) {
        record_.block_details.resize(std::size_t(blocks));
        phase_.resize(std::size_t(blocks));
        std::uniform_real_distribution<double> u(0.0, 6.28);
        for (auto& p : phase_) p = u(rng_);
    }
    const sp::UpdateRecord& make(std::size_t update) {
        record_.step_id = std::int64_t(update) * 10;
        record_.timestamp = 1.0e9 + double(update);
        record_.estimated_bandwidth_saving_pct = 20.0 + 10.0 * std::sin(double(update) * 0.001);
        record_.train_loss = 3.0 * std::exp(-double(update) * 1e-4) + 0.5;
        int int8 = 0, fp8 = 0;
        for (int b = 0; b < blocks_; ++b) {
            sp::BlockDetail& d = record_.block_details[std::size_t(b)];
            d.id = b;
            const double s =
                0.5 + 0.45 * std::sin(phase_[std::size_t(b)] + double(update) * 0.002 + b * 0.01);
            d.sensitivity = s;
            d.precision =
                s < 0.2 ? sp::Precision::fp8_e4m3 : (s < 0.45 ? sp::Precision::int8 : sp::Precision::bf16);
            int8 += d.precision == sp::Precision::int8;
            fp8 += d.precision == sp::Precision::fp8_e4m3;
            d.forced =
                b % 97 == 0 ? sp::ForcedBy::pin : (b % 89 == 0 ? sp::ForcedBy::config : sp::ForcedBy::none);
            d.l2_norm = 1.0 + s;
            d.max_abs = 0.1 * s;
            d.grad_score = s;
            d.error_score = 1.0 - s;
            d.relative_magnitude = 0.01;
        }
        record_.blocks_int8 = int8;
        record_.blocks_fp8 = fp8;
        record_.blocks_bf16 = blocks_ - int8 - fp8;
        return record_;
    }

  private:
    int blocks_;
    std::mt19937 rng_;
    std::vector<double> phase_;
    sp::UpdateRecord record_;
};

}  // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    int blocks = 1000;
    std::size_t updates = 10000;
    int repaints = 50;
    QString png_dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i];
        if (key == "--blocks") blocks = std::atoi(argv[i + 1]);
        if (key == "--updates") updates = std::size_t(std::atol(argv[i + 1]));
        if (key == "--repaints") repaints = std::atoi(argv[i + 1]);
        if (key == "--png") png_dir = QString::fromLocal8Bit(argv[i + 1]);
    }
    std::printf("bench_heatmap: %d blocks x %zu updates, heatmap 1600x1000 at full zoom-out, %d repaints\n",
                blocks, updates, repaints);

    sp::ui::TelemetryStore store;
    store.reset(sp::uniform_layout(blocks));
    store.reserve(updates + std::size_t(repaints) + 16);
    RecordMaker maker(blocks);
    auto t0 = Clock::now();
    for (std::size_t u = 0; u < updates; ++u) store.append(maker.make(u));
    std::printf("store fill: %.0f ms, %.0f MB\n",
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                double(store.memoryBytes()) / 1e6);

    // Baseline: blit an already-scaled image of the heatmap's size.
    QImage scaled(1600, 1000, QImage::Format_RGB32);
    scaled.fill(sp::ui::sensitivityColor(0.3f));
    QImage target(1600, 1000, QImage::Format_RGB32);
    const Stats base = time_it(repaints, [&] {
        QPainter p(&target);
        p.drawImage(0, 0, scaled);
    });
    print("baseline: drawImage of a pre-scaled 1600x1000", base, base);

    sp::ui::HeatmapView view;
    view.resize(1600, 1000);
    view.show();
    QCoreApplication::processEvents();
    t0 = Clock::now();
    view.setStore(&store);  // builds the one-pixel-per-cell image
    std::printf("initial image build (%zu x %d cells): %.1f ms\n", updates, blocks,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    view.fitAll();
    std::printf("zoom: %.4f px/update, %.3f px/block\n", view.pixelsPerUpdate(), view.pixelsPerBlock());
    view.viewport()->repaint();

    const Stats cached = time_it(repaints, [&] { view.viewport()->repaint(); });
    print("heatmap repaint, nothing changed (cached grid)", cached, base);

    std::size_t next = updates;
    const Stats append_refresh = time_it(
        repaints, [&] { view.refresh(); }, [&] { store.append(maker.make(next++)); });
    print("append 1 update: refresh() (writes 1 column)", append_refresh, base);

    const Stats append_paint = time_it(
        repaints,
        [&] {
            view.refresh();
            view.viewport()->repaint();
        },
        [&] { store.append(maker.make(next++)); });
    print("append 1 update: refresh() + repaint (resample)", append_paint, base);

    view.zoomUpdates(1.5);  // still zoomed out, still following the live edge
    const Stats follow_paint = time_it(
        repaints,
        [&] {
            view.refresh();
            view.viewport()->repaint();
        },
        [&] { store.append(maker.make(next++)); });
    print("same at 1.5x the fitted zoom, following", follow_paint, base);
    view.fitAll();

    const Stats export_image =
        time_it(std::max(5, repaints / 5), [&] { (void)view.renderToImage(QSize(1600, 1000)); });
    print("renderToImage 1600x1000 (uncached)", export_image, base);

    view.zoomUpdates(40.0);
    view.viewport()->repaint();
    const Stats zoomed = time_it(repaints, [&] { view.viewport()->repaint(); });
    std::printf("zoomed in to %.1f px/update:\n", view.pixelsPerUpdate());
    print("heatmap repaint zoomed in, nothing changed", zoomed, base);
    view.setTimelineCursor(updates);  // jump the replay cursor: a full resample each time
    const Stats cursor = time_it(repaints, [&] {
        view.setTimelineCursor(view.timelineCursor() == updates ? updates - 1 : updates);
        view.viewport()->repaint();
    });
    print("cursor move + repaint (resample, zoomed in)", cursor, base);

    if (!png_dir.isEmpty()) {
        QDir().mkpath(png_dir);
        view.fitAll();
        view.setSelection({3, 4, 5, 500});
        view.grab().save(png_dir + QStringLiteral("/heatmap_full.png"));
        view.zoomUpdates(60.0);
        view.zoomBlocks(30.0);
        view.grab().save(png_dir + QStringLiteral("/heatmap_zoomed.png"));
        sp::ui::HeatmapLegend legend;
        legend.resize(legend.sizeHint());
        legend.grab().save(png_dir + QStringLiteral("/legend.png"));
    }
    view.clearTimelineCursor();

    // Charts for a run of `updates` updates (the same store, capped at `updates` by the cursor).
    sp::ui::ChartsPanel charts;
    charts.resize(1600, 1000);
    charts.show();
    QCoreApplication::processEvents();
    charts.setStore(&store);
    charts.setSelectedBlocks({1, 200, 700});
    charts.setTimelineCursor(updates);
    charts.refresh();
    QCoreApplication::processEvents();
    const Stats chart_refresh = time_it(repaints, [&] {
        charts.setTimelineCursor(charts.selectedBlocks().empty() ? updates
                                                                 : (next % 2 ? updates : updates - 1));
        ++next;
    });
    print("charts refresh (decimate + replace), 10k updates", chart_refresh, base);
    const Stats chart_noop = time_it(repaints, [&] { charts.refresh(); });
    print("charts refresh, nothing changed", chart_noop, base);
    const Stats chart_paint = time_it(std::max(5, repaints / 5), [&] { (void)charts.renderToImage(); });
    print("charts render (5 charts, 1600x1000 grab)", chart_paint, base);
    std::printf("chart points drawn: %lld\n", static_cast<long long>(charts.drawnPointCount()));
    if (!png_dir.isEmpty()) charts.renderToImage().save(png_dir + QStringLiteral("/charts.png"));
    return 0;
}
