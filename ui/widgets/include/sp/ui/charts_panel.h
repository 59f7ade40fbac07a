#pragma once
// The run's time series as Qt charts, stacked vertically: bandwidth saving (estimated, measured),
// blocks per precision, the selected blocks' sensitivity and gradient L2, and the loss (hidden,
// with a note, when the run has none). Series are decimated per pixel column (min/max), so a long
// run draws as fast as a short one; refresh() is cheap when nothing changed.
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
class QLabel;
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

    const RunSession* session_ = nullptr;
    const TelemetryStore* store_ = nullptr;
    std::vector<int> selected_;
    std::size_t cursor_ = kNoCursor;
    bool dark_ = false;
    bool theme_explicit_ = false;

    // Run-level columns copied from the store as updates arrive (decimation wants contiguous floats).
    std::vector<double> steps_;
    std::vector<float> estimated_, measured_, target_, bf16_, int8_, fp8_, int4_, train_loss_, eval_loss_;
    std::array<std::vector<float>*, 9> runColumns() {
        return {&estimated_, &measured_, &target_, &bf16_, &int8_, &fp8_, &int4_, &train_loss_, &eval_loss_};
    }
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
        bool operator==(const DrawnKey& o) const {
            return store == o.store && shown == o.shown && selected == o.selected && width == o.width &&
                   dark == o.dark && resets == o.resets && overlays == o.overlays;
        }
    };
    DrawnKey drawn_;
    bool drawn_valid_ = false;
    std::uint64_t resets_ = 0;
    std::vector<Overlay> overlays_;
    std::uint64_t overlays_revision_ = 0;
};

}  // namespace sp::ui
