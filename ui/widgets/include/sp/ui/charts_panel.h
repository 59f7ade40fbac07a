#pragma once
// The run's time series as Qt charts, stacked vertically: bandwidth saving (estimated, measured),
// blocks per precision, the selected blocks' sensitivity and gradient L2, and the loss (hidden,
// with a note, when the run has none). Series are decimated per pixel column (min/max), so a long
// run draws as fast as a short one; refresh() is cheap when nothing changed.
// Around the data: the policy's thresholds and hysteresis band on the sensitivity chart, marks where
// blocks switched precision, commands applied and rollbacks happened (saving and loss charts), a
// hover readout, EMA smoothing of the losses and log scales for the loss and gradient charts.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
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
class QSlider;
class QValueAxis;
QT_END_NAMESPACE

namespace sp::ui {

class ChartLine;
class RunSession;
class TelemetryStore;

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

    // A series drawn over the saving or the loss chart besides the run's own: another run's
    // (compare) or the what-if's. x in steps; the x range grows to show all of it.
    struct Overlay {
        Chart chart = Chart::saving;  // saving or loss
        QString name;                 // its legend entry
        std::vector<double> steps;
        std::vector<float> values;
        QRgb color = 0;
    };
    void setOverlays(std::vector<Overlay> overlays);

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

  protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    struct ChartBox;
    void buildCharts();
    void appendRunColumns();
    void rebuildSelectedLines();
    void redraw();
    void applyTheme();
    int plotWidth() const;
    std::size_t shownCount() const;
    // chart_scale.cpp: the controls row, the y axes (titles, log scale), the raw loss lines.
    void buildControls(QGridLayout* layout);
    QWidget* buildMarkerKey(QWidget* parent) const;
    void buildLogAxes();
    void styleExtras(ChartBox& box);
    void fitAxisTitles(ChartBox& box);
    void hideRawLossLegend();
    void syncYAxes(ChartBox& box);
    void setLogRange(ChartBox& box, double lo, double hi);
    // chart_guides.cpp: what each chart shows in words (tooltips), thresholds, markers.
    void setExplanations();
    void buildGuides();
    void buildMarkerSeries();
    void drawThresholds(double x_lo, double x_hi);
    void placeGuideLabels();
    void drawMarkers(double x_lo, double x_hi);
    // chart_readout.cpp: the hover guide and label.
    bool eventFilter(QObject* watched, QEvent* event) override;
    void showHover(Chart chart, QPointF view_pos);
    void hideHover();
    std::size_t nearestUpdate(double step) const;

    const RunSession* session_ = nullptr;
    const TelemetryStore* store_ = nullptr;
    std::vector<int> selected_;
    std::size_t cursor_ = kNoCursor;
    bool dark_ = false;
    bool theme_explicit_ = false;

    // Run-level columns copied from the store as updates arrive (decimation wants contiguous floats).
    std::vector<double> steps_;
    std::vector<double> eval_steps_;  // where each update's eval loss was measured (eval_step)
    std::vector<float> estimated_, measured_, target_, bf16_, int8_, fp8_, int4_, train_loss_, eval_loss_;
    std::array<std::vector<float>*, 9> runColumns() {
        return {&estimated_, &measured_, &target_, &bf16_, &int8_, &fp8_, &int4_, &train_loss_, &eval_loss_};
    }
    double smoothing_ = kDefaultSmoothing;
    QSlider* smoothing_slider_ = nullptr;
    QLabel* smoothing_label_ = nullptr;
    QCheckBox* log_loss_ = nullptr;
    QCheckBox* log_gradient_ = nullptr;
    double first_timestamp_ = 0.0;

    std::array<std::unique_ptr<ChartBox>, kChartCount> charts_;
    QLabel* no_loss_label_ = nullptr;

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
        bool operator==(const DrawnKey& o) const {
            return store == o.store && shown == o.shown && selected == o.selected && width == o.width &&
                   dark == o.dark && resets == o.resets && overlays == o.overlays && session == o.session &&
                   smoothing == o.smoothing && log_loss == o.log_loss && log_gradient == o.log_gradient;
        }
    };
    DrawnKey drawn_;
    bool drawn_valid_ = false;
    std::uint64_t resets_ = 0;
    std::vector<Overlay> overlays_;
    std::uint64_t overlays_revision_ = 0;
};

}  // namespace sp::ui
