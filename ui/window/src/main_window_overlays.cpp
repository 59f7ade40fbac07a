// The charts' overlays: other open runs drawn over the current one (compare), and the what-if.
#include <QAction>
#include <QFileInfo>

#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"
#include "sp/ui/what_if_panel.h"

namespace sp::ui {
namespace {

// A file's name, or a live run's endpoint: short enough for a legend. A run before an agent restart
// shares its source with the run after it: its run id tells them apart.
QString shortLabel(const RunSession& s) {
    const QString label = s.source().label();
    QString name = s.fromAgent() ? label : QFileInfo(label).fileName();
    if (s.followedBy().isEmpty()) return name;
    return QStringLiteral("%1 · run %2").arg(name, QString::fromStdString(s.header().run_id));
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
    // Every chart draws the other runs' counterparts of its lines (ChartsPanel::setOverlayRuns); the
    // sessions, and so their stores, live as long as the window.
    std::vector<ChartsPanel::OverlayRun> runs;
    if (compare_action_->isChecked())
        for (const RunSession* s : sessions_)
            if (s != current_) runs.push_back({shortLabel(*s), &s->store()});
    charts_->setOverlayRuns(std::move(runs));
    charts_->setOverlays(what_if_overlays_);
}

void MainWindow::takeWhatIf() {
    what_if_overlays_.clear();
    const auto& result = what_if_->result();
    if (result && result->error.empty()) {
        ChartsPanel::Overlay saving{
            ChartsPanel::Chart::saving, tr("what-if: estimated"), {}, {}, ChartsPanel::kWhatIfColor};
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
