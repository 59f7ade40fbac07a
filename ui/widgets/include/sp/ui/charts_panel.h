#pragma once
// The run's time series as Qt charts, stacked vertically: bandwidth saving (estimated, measured),
// blocks per precision, the selected blocks' sensitivity and gradient L2, and the loss (hidden,
// with a note, when the run has none). Every line is read in place from the store (no copies) and
// drawn at most 2 points per pixel column: a zoomed-out range as a min/max envelope from the store's
// summaries, so a long run draws as fast as a short one; refresh() is cheap when nothing changed.
// Around the data: the policy's thresholds and hysteresis band on the sensitivity chart, marks where
// blocks switched precision, commands applied and rollbacks happened (saving and loss charts), a
// hover readout, EMA smoothing of the losses and log scales for the loss and gradient charts, other
// runs overlaid, zoom and pan over the steps, one chart enlarged, a chart's lines exported as CSV.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <QImage>
#include <QList>
#include <QPointF>
#include <QRgb>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QCheckBox;
class QGridLayout;
class QLabel;
class QMouseEvent;
class QSlider;
class QValueAxis;
class QWheelEvent;
QT_END_NAMESPACE

namespace sp::ui {

class ChartLine;
class RunSession;
class TelemetryStore;
class StoreSeries;
struct LineSource;

class ChartsPanel : public QWidget {
    Q_OBJECT
  public:
    enum class Chart { saving, precision, sensitivity, gradient, loss };
    static constexpr int kChartCount = 5;
    // Selected blocks drawn at most (the title says how many were left out).
    static constexpr int kMaxSelectedLines = 8;
    static constexpr std::size_t kNoCursor = std::numeric_limits<std::size_t>::max();

    explicit ChartsPanel(QWidget* parent = nullptr);
    ~ChartsPanel() override;

    // Data, as for HeatmapView: a session (resets followed) or a store the caller fills.
    void setSession(const RunSession* session);
    void setStore(const TelemetryStore* store);
    void resetData();
    // Brings the charts up to the store (new updates, selection, cursor, size). Cheap when nothing
    // changed: call it from the repaint timer.
    void refresh();

    void setSelectedBlocks(std::vector<int> blocks);
    const std::vector<int>& selectedBlocks() const { return selected_; }
    // Replay timeline: only updates [0, count) are drawn. kNoCursor: all.
    void setTimelineCursor(std::size_t count);

    // A series drawn over one chart besides the run's own lines: the what-if's estimated saving.
    // x in steps; the x range grows to show all of it. A loss is smoothed as the run's losses are.
    struct Overlay {
        Chart chart = Chart::saving;
        QString name;  // its legend entry
        std::vector<double> steps;
        std::vector<float> values;
        QRgb color = 0;
    };
    void setOverlays(std::vector<Overlay> overlays);
    // The what-if's colour: apart (CIE76 distance over 40) from every line and mark of the saving chart.
    static constexpr QRgb kWhatIfColor = 0xFFE7298Au;

    // Other runs drawn over this one's (compare): every chart draws each run's counterpart of its own
    // lines (estimated and measured saving, the blocks per precision, the selected blocks found by
    // name, the train and eval losses) in the same colours, dashed, one dash per run, the lines named
    // "NAME: estimated"; a key under the controls names each run with its dash. The x range covers
    // the longest run. The stores are read at every redraw: they must outlive their use here, until
    // the next setOverlayRuns (call it again when their data moved).
    struct OverlayRun {
        QString name;
        const TelemetryStore* store = nullptr;
    };
    void setOverlayRuns(std::vector<OverlayRun> runs);

    // Zoom. All charts show the same step range (one x axis: the hover guide, the marks and the
    // charts line up). Following (the default), the range covers everything and grows with the run.
    // Zoomed (the mouse wheel at a point, a drag to pan, or setXView), it stays where it was put while
    // updates arrive, except a range that reaches the last step, which keeps its width and follows the
    // live edge. A double-click on a plot (or resetXView) follows everything again.
    void setXView(double lo, double hi);
    void resetXView();
    bool xZoomed() const;
    std::pair<double, double> xRange() const;  // the steps the charts show now

    // One chart alone in the panel (its context menu's "Enlarge chart", or a double-click on its
    // title); nullopt shows them all again.
    void setEnlarged(std::optional<Chart> chart);
    std::optional<Chart> enlarged() const { return enlarged_; }

    // A chart's lines as CSV, at full resolution and over the whole run (not the zoomed range): a
    // "step" column, then a column per line named as its legend names it, one row per step any line
    // has a value at. The context menu's "Export series as CSV…" asks for the file with the prompt
    // (a save dialog unless replaced: tests return a path) and writes it.
    QString seriesCsv(Chart chart) const;
    // Writes seriesCsv(chart) to `path`; returns the error, empty when written.
    QString exportSeriesCsv(Chart chart, const QString& path) const;
    // Given a suggested file name, the path to write (empty: cancelled).
    using PathPrompt = std::function<QString(const QString& suggested)>;
    void setCsvPathPrompt(PathPrompt prompt) { csv_path_prompt_ = std::move(prompt); }

    // Follows the palette (dark window → dark charts) until set explicitly.
    void setDarkTheme(bool dark);
    bool darkTheme() const { return dark_; }

    QChartView* chartView(Chart chart) const;
    // The charts currently shown (the loss chart is left out when the run has no loss).
    std::vector<QChartView*> chartViews() const;
    // The panel as shown, for PNG export.
    QImage renderToImage();
    // The points drawn for a line of a chart, by its legend name ("estimated", "BF16", a block's
    // name, ...); nullopt when the chart has no such line or it is hidden. For tests and export.
    std::optional<QList<QPointF>> linePoints(Chart chart, const QString& name) const;
    // Points currently drawn over all lines (what decimation bounds).
    qsizetype drawnPointCount() const;

    // What the hover shows for `step` on a chart: the nearest recorded step and every line's value
    // there ("step 1200 · estimated 41.2% · measured 40.8%"); empty when nothing is drawn.
    QString readoutAt(Chart chart, double step) const;
    // The hover label's text now (empty when the mouse is not over a plot): readoutAt()'s, one value
    // a line when the plot is too narrow for one line.
    QString hoverText(Chart chart) const;

    // Loss smoothing, TensorBoard's debiased EMA: s_i = (w·m_{i-1} + (1-w)·v_i) / (1 - w^i), raw
    // lines drawn faint behind; weight 0 draws the raw losses only. Clamped to [0, kMaxSmoothing].
    static constexpr double kDefaultSmoothing = 0.6;
    static constexpr double kMaxSmoothing = 0.99;
    void setLossSmoothing(double weight);
    double lossSmoothing() const { return smoothing_; }
    // Log y axis for the loss and gradient charts (others ignore it); points <= 0 are left out.
    void setLogScale(Chart chart, bool on);
    bool logScale(Chart chart) const;
    QSlider* smoothingSlider() const { return smoothing_slider_; }
    QCheckBox* logScaleBox(Chart chart) const;

    // The policy's lines on the sensitivity chart, from the session's run config (none without a
    // session or when the header has no config): name → y. The hold band is [lower, upper).
    struct Threshold {
        QString name;
        double y = 0.0;
    };
    std::vector<Threshold> thresholds() const;
    std::optional<std::pair<double, double>> holdBand() const;

    // Marks on the saving and loss charts. At most kMaxMarkers per kind are drawn: marks closer than
    // (x range / kMaxMarkers) merge into the first of them.
    enum class Marker { precision_switch, command, rollback };
    static constexpr int kMarkerKinds = 3;
    static constexpr int kMaxMarkers = 120;
    std::vector<double> markerSteps(Chart chart, Marker kind) const;

    // Two rows of charts about 180 px tall under the controls: asked of a splitter that shares a
    // 1280x800 window with the heatmap, less leaves plots too short for labelled ticks and a legend.
    QSize sizeHint() const override;

  protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    struct ChartBox;
    struct OverlaidRun;
    void buildCharts();
    void buildChart(Chart which, const QString& title, const QString& y_title);
    void redraw();
    void updateTitles();
    bool drawChart(Chart which, const std::vector<LineSource>& sources, double x_lo, double x_hi,
                   int columns);
    void applyTheme();
    int plotWidth() const;
    std::size_t shownCount() const;
    // chart_lines.cpp: the lines each chart draws, at full resolution: the run's own, then the
    // overlaid runs' counterparts, then the overlays.
    std::vector<LineSource> linesOf(Chart which) const;
    void addOwnLines(Chart which, std::vector<LineSource>& out) const;
    void addRunLines(Chart which, const OverlaidRun& run, std::size_t index,
                     std::vector<LineSource>& out) const;
    void addStoreLines(Chart which, const TelemetryStore& store, std::size_t n, const LineSource& look,
                       std::vector<LineSource>& out) const;
    void addLossLines(const StoreSeries& train, const StoreSeries& eval, const LineSource& look,
                      std::vector<LineSource>& out) const;
    void addOverlayLines(Chart which, std::vector<LineSource>& out) const;
    std::pair<double, double> fullXRange() const;
    void syncLines(ChartBox& box, const std::vector<LineSource>& sources);
    // chart_legend.cpp: the legend under each chart (wrapped, never cut short), the runs' key.
    void updateLegend(Chart which, const std::vector<LineSource>& sources);
    QString thresholdLegend() const;
    void updateRunsKey();
    // chart_scale.cpp: the controls row, the y axes (titles, log scale), the raw loss lines.
    void buildControls(QGridLayout* layout);
    QWidget* buildMarkerKey(QWidget* parent) const;
    void buildLogAxes();
    void styleExtras(ChartBox& box);
    void fitAxisTitles(ChartBox& box);
    void syncYAxes(ChartBox& box);
    void setLogRange(ChartBox& box, double lo, double hi);
    // Axis ranges with ticks whose labels fit between them (chart_scale.cpp).
    void setAxisRange(ChartBox& box, Qt::Orientation orientation, double lo, double hi);
    void fitTicks(ChartBox& box);
    // chart_guides.cpp: what each chart shows in words (tooltips), thresholds, markers.
    void setExplanations();
    void buildGuides();
    void buildMarkerSeries();
    void drawThresholds(double x_lo, double x_hi);
    void collectMarkers(double x_lo, double x_hi);
    void placeMarkers(ChartBox& box);
    // chart_readout.cpp: the hover guide and label.
    void showHover(Chart chart, QPointF view_pos);
    void hideHover();
    std::size_t nearestUpdate(double step) const;
    // chart_navigation.cpp: the mouse on a plot: hover, wheel zoom, drag pan, double-clicks.
    bool eventFilter(QObject* watched, QEvent* event) override;
    bool onWheel(Chart chart, QWheelEvent* event);
    bool onMouse(Chart chart, QMouseEvent* event);
    std::optional<double> stepAt(Chart chart, QPointF view_pos) const;
    void setXViewRange(double lo, double hi);
    // chart_actions.cpp: each chart's context menu (enlarge, reset zoom, export CSV) and the grid.
    void buildActions(Chart which);
    void exportCsvAsked(Chart which);
    void placeCharts();
    void updateVisibility();

    const RunSession* session_ = nullptr;
    const TelemetryStore* store_ = nullptr;
    std::vector<int> selected_;
    std::size_t cursor_ = kNoCursor;
    bool dark_ = false;
    bool theme_explicit_ = false;

    // The store's updates at the last refresh and its first update's timestamp: fewer updates or
    // another first update mean it was reset and refilled behind our back. The lines themselves are
    // read from the store at every redraw (store_series.h), never copied.
    std::size_t store_updates_ = 0;
    double store_first_timestamp_ = 0.0;
    double smoothing_ = kDefaultSmoothing;
    QSlider* smoothing_slider_ = nullptr;
    QLabel* smoothing_label_ = nullptr;
    QCheckBox* log_loss_ = nullptr;
    QCheckBox* log_gradient_ = nullptr;
    QLabel* runs_key_ = nullptr;  // "Other runs: ╍╍ a.jsonl ┈┈ b.jsonl", while runs are overlaid

    QGridLayout* grid_ = nullptr;
    std::array<std::unique_ptr<ChartBox>, kChartCount> charts_;
    QLabel* no_loss_label_ = nullptr;
    bool has_loss_ = false;
    std::optional<Chart> enlarged_;
    PathPrompt csv_path_prompt_;

    // The steps shown: all of them (full_x_) unless zoomed; a zoomed range that reached the last step
    // follows it (x_view_follows_edge_).
    std::optional<std::pair<double, double>> x_view_;
    bool x_view_follows_edge_ = false;
    std::pair<double, double> full_x_{0.0, 1.0};
    std::pair<double, double> shown_x_{0.0, 1.0};
    std::uint64_t x_view_revision_ = 0;
    // A drag in progress: the chart, where it started (x in the viewport) and the range then.
    std::optional<Chart> drag_chart_;
    double drag_from_x_ = 0.0;
    std::pair<double, double> drag_from_range_{0.0, 1.0};

    // What the charts show now; refresh() redraws only when it moved.
    struct DrawnKey {
        const TelemetryStore* store = nullptr;
        std::size_t shown = 0;
        std::vector<int> selected;
        int width = 0;
        bool dark = false;
        std::uint64_t resets = 0;
        std::uint64_t overlays = 0;
        std::uint64_t session = 0;  // the session's revision: events (markers), commands applied
        double smoothing = 0.0;
        bool log_loss = false;
        bool log_gradient = false;
        std::uint64_t x_view = 0;
        bool operator==(const DrawnKey& o) const {
            return store == o.store && shown == o.shown && selected == o.selected && width == o.width &&
                   dark == o.dark && resets == o.resets && overlays == o.overlays && session == o.session &&
                   smoothing == o.smoothing && log_loss == o.log_loss && log_gradient == o.log_gradient &&
                   x_view == o.x_view;
        }
    };
    DrawnKey drawn_;
    bool drawn_valid_ = false;
    std::uint64_t resets_ = 0;
    std::vector<Overlay> overlays_;
    std::vector<OverlaidRun> overlay_runs_;
    std::uint64_t overlays_revision_ = 0;
};

}  // namespace sp::ui
