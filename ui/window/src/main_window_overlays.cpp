// The charts' overlays: other open runs drawn over the current one (compare), and the what-if.
#include <array>

#include <QAction>
#include <QFileInfo>

#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"
#include "sp/ui/what_if_panel.h"

namespace sp::ui {
namespace {

// Distinct from the run's own lines (charts_panel.cpp) and from each other.
constexpr std::array<QRgb, 4> kOtherRunColors = {0xffbc8cff, 0xfff778ba, 0xff39c5cf, 0xff8b949e};
constexpr QRgb kWhatIfColor = 0xffffa657;

// A file's name, or a live run's endpoint: short enough for a legend.
QString shortLabel(const RunSession& s) {
    const QString label = s.source().label();
    return s.isLive() ? label : QFileInfo(label).fileName();
}

void addRun(std::vector<ChartsPanel::Overlay>& out, const RunSession& s, QRgb color) {
    ChartsPanel::Overlay saving{
        ChartsPanel::Chart::saving, shortLabel(s) + QStringLiteral(": estimated"), {}, {}, color};
    ChartsPanel::Overlay loss{
        ChartsPanel::Chart::loss, shortLabel(s) + QStringLiteral(": train loss"), {}, {}, color};
    for (const UpdateRow& r : s.store().rows()) {
        saving.steps.push_back(double(r.step));
        saving.values.push_back(r.estimated_saving_pct);
        loss.steps.push_back(double(r.step));
        loss.values.push_back(r.train_loss);
    }
    out.push_back(std::move(saving));
    out.push_back(std::move(loss));
}

}  // namespace

void MainWindow::updateOverlays() {
    // What the overlays depend on: the toggle, the current run, the what-if, every other run's data.
    std::vector<std::uint64_t> from = {compare_action_->isChecked() ? 1u : 0u, what_if_overlays_.size()};
    if (compare_action_->isChecked())
        for (const RunSession* s : sessions_)
            if (s != current_) from.push_back(s->revision());
    if (from == overlaid_ && current_ == overlaid_session_) return;
    overlaid_ = std::move(from);
    overlaid_session_ = current_;
    std::vector<ChartsPanel::Overlay> overlays;
    if (compare_action_->isChecked()) {
        std::size_t next = 0;
        for (const RunSession* s : sessions_)
            if (s != current_) addRun(overlays, *s, kOtherRunColors[next++ % kOtherRunColors.size()]);
    }
    overlays.insert(overlays.end(), what_if_overlays_.begin(), what_if_overlays_.end());
    charts_->setOverlays(std::move(overlays));
}

void MainWindow::takeWhatIf() {
    what_if_overlays_.clear();
    const auto& result = what_if_->result();
    if (result && result->error.empty()) {
        ChartsPanel::Overlay saving{
            ChartsPanel::Chart::saving, tr("what-if: estimated"), {}, {}, kWhatIfColor};
        for (const UpdateRecord& r : result->records) {
            saving.steps.push_back(double(r.step_id));
            saving.values.push_back(float(r.estimated_bandwidth_saving_pct));
        }
        what_if_overlays_.push_back(std::move(saving));
    }
    overlaid_.clear();  // rebuild
    updateOverlays();
}

}  // namespace sp::ui
