#include "sp/ui/what_if_panel.h"

#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "sp/ui/run_session.h"

namespace sp::ui {
namespace {

QDoubleSpinBox* box(QWidget* parent, double max, double step, int decimals) {
    auto* b = new QDoubleSpinBox(parent);
    b->setRange(0.0, max);
    b->setSingleStep(step);
    b->setDecimals(decimals);
    return b;
}

QString text(Precision p) {
    return QString::fromLatin1(to_string(p).data(), int(to_string(p).size()));
}

}  // namespace

WhatIfPanel::WhatIfPanel(QWidget* parent)
    : QWidget(parent),
      bf16_(box(this, 1.0, 0.01, 3)),
      int8_(box(this, 1.0, 0.01, 3)),
      hysteresis_(box(this, 1.0, 0.01, 3)),
      budget_(box(this, 100.0, 1.0, 1)),
      run_(new QPushButton(tr("Re-simulate"), this)),
      summary_(new QLabel(this)),
      table_(new QTableWidget(0, 3, this)) {
    bf16_->setToolTip(tr("bf16_threshold: at or above it a block stays BF16"));
    int8_->setToolTip(tr("int8_threshold: below it a block may leave BF16"));
    hysteresis_->setToolTip(
        tr("hysteresis_margin: a low-precision block returns to BF16 only at or above "
           "int8_threshold - hysteresis_margin"));
    budget_->setToolTip(tr("budget_target_pct: the budget mode's target saving against all-BF16"));
    auto* form = new QFormLayout;
    form->addRow(tr("bf16_threshold"), bf16_);
    form->addRow(tr("int8_threshold"), int8_);
    form->addRow(tr("hysteresis_margin"), hysteresis_);
    form->addRow(tr("budget target %"), budget_);
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    table_->setHorizontalHeaderLabels({tr("Block"), tr("Recorded"), tr("What-if")});
    table_->horizontalHeaderItem(1)->setToolTip(
        tr("The block's precision at the recorded run's last update"));
    table_->horizontalHeaderItem(2)->setToolTip(tr("Its precision at the last update under these settings"));
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(run_);
    layout->addWidget(summary_);
    layout->addWidget(table_, 1);
    connect(run_, &QPushButton::clicked, this, &WhatIfPanel::run);
    refresh();
}

WhatIfPanel::~WhatIfPanel() {
    cancelRunning();
    if (worker_.joinable()) worker_.join();  // quick: the simulation polls its cancel flag
}

// The run in flight, if any, is for a session no longer shown: stop it, and drop what it returns.
void WhatIfPanel::cancelRunning() {
    ++generation_;
    if (cancel_) cancel_->store(true);
}

void WhatIfPanel::setSession(const RunSession* session) {
    cancelRunning();
    session_ = session;
    result_.reset();
    table_->setRowCount(0);
    if (session_) {
        WhatIfSettings s = whatIfSettingsOf(session_->runConfig());
        // Live, the target in force (a set_budget the run applied); a replay keeps its config's, from
        // which a re-simulation with the boxes untouched reproduces the recording.
        if (session_->isLive()) s.budget_target_pct = session_->budgetTargetPct();
        setSettings(s);
        shown_target_ = budget_->value();
    }
    refresh();
}

// Live, the budget box follows the run's target in force while it still shows the last one it was
// given (the operator has not typed another).
void WhatIfPanel::followTarget() {
    if (session_ == nullptr || !session_->isLive() || budget_->value() != shown_target_) return;
    budget_->setValue(session_->budgetTargetPct());
    shown_target_ = budget_->value();
}

void WhatIfPanel::setSettings(const WhatIfSettings& s) {
    bf16_->setValue(s.bf16_threshold);
    int8_->setValue(s.int8_threshold);
    hysteresis_->setValue(s.hysteresis_margin);
    budget_->setValue(s.budget_target_pct);
}

WhatIfSettings WhatIfPanel::settings() const {
    return {bf16_->value(), int8_->value(), hysteresis_->value(), budget_->value()};
}

// A recorded file with per-step statistics, and no re-simulation in flight.
void WhatIfPanel::refresh() {
    followTarget();
    const bool usable = session_ != nullptr && !session_->isLive() && session_->stepStatsSeen() > 0;
    const bool running = worker_.joinable();
    run_->setEnabled(usable && !running);
    if (running || result_) return;  // the summary shows the progress or the last result
    summary_->setText(usable ? tr("Change the thresholds, then Re-simulate: the routing core's policy "
                                  "would have produced on this run's statistics.")
                             : tr("Needs a replayed file recorded with per-step statistics "
                                  "(sp-trainer --every-step-stats)."));
}

void WhatIfPanel::run() {
    refresh();
    if (!run_->isEnabled()) return;
    result_.reset();
    const std::string path = session_->source().label().toStdString();  // a replay's label is its path
    const Config config = applyWhatIf(session_->runConfig(), settings());
    run_->setEnabled(false);
    summary_->setText(tr("Re-simulating…"));
    // The result comes back on the GUI thread, tagged with the session it was for; a panel
    // destroyed first cancels and joins the worker, and the queued call to it is dropped with it.
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    worker_ = std::thread([this, path, config, cancel = cancel_, generation = generation_] {
        WhatIfResult r = simulateWhatIf(path, config, cancel);
        QMetaObject::invokeMethod(
            this, [this, r = std::move(r), generation]() mutable { present(std::move(r), generation); },
            Qt::QueuedConnection);
    });
}

void WhatIfPanel::present(WhatIfResult r, std::uint64_t generation) {
    if (worker_.joinable()) worker_.join();
    cancel_.reset();
    if (generation != generation_) {  // another run is shown now: this result is not its
        refresh();
        return;
    }
    result_ = std::move(r);
    refresh();
    if (!result_->error.empty()) {
        summary_->setText(tr("Cannot re-simulate: %1").arg(QString::fromStdString(result_->error)));
        emit finished();
        return;
    }
    const TelemetryStore& store = session_->store();
    const std::size_t blocks = std::size_t(store.blockCount());
    const RoutingSummary what_if = summarize(result_->records, blocks);
    const RoutingSummary recorded = summarize(store);
    summary_->setText(tr("Mean estimated saving: recorded %1%, what-if %2%. Switches: recorded %3, "
                         "what-if %4 (%5 updates).")
                          .arg(recorded.mean_estimated_saving_pct, 0, 'f', 1)
                          .arg(what_if.mean_estimated_saving_pct, 0, 'f', 1)
                          .arg(recorded.switches)
                          .arg(what_if.switches)
                          .arg(what_if.updates));
    table_->setRowCount(int(blocks));
    for (std::size_t b = 0; b < blocks; ++b) {
        const int row = int(b);
        table_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(store.layout()[b].name)));
        table_->setItem(row, 1, new QTableWidgetItem(text(recorded.final_precision[b])));
        auto* cell = new QTableWidgetItem(text(what_if.final_precision[b]));
        if (what_if.final_precision[b] != recorded.final_precision[b]) {
            QFont bold = cell->font();
            bold.setBold(true);
            cell->setFont(bold);
        }
        table_->setItem(row, 2, cell);
    }
    emit finished();
}

}  // namespace sp::ui
