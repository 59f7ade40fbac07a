#pragma once
// The what-if panel: change the run's thresholds (or budget target), re-simulate the replayed file
// in process (what_if.h, on a worker thread) and compare with what was recorded: the mean estimated
// saving, the switches, and each block's final precision side by side. Needs a replayed file written
// with per-step statistics (sp-trainer --every-step-stats); otherwise it says so.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include <QWidget>

#include "sp/ui/what_if.h"

class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QTableWidget;

namespace sp::ui {

class RunSession;

class WhatIfPanel : public QWidget {
    Q_OBJECT
  public:
    explicit WhatIfPanel(QWidget* parent = nullptr);
    ~WhatIfPanel() override;  // cancels a re-simulation in flight and waits for it to stop

    // The run to try thresholds on; the boxes take its config's values and, for a live run, the
    // budget box its target in force (RunSession::budgetTargetPct), which it follows until the
    // operator types another. A re-simulation of the previous run still in flight is cancelled, and
    // its result never shown.
    void setSession(const RunSession* session);
    void setSettings(const WhatIfSettings& s);
    WhatIfSettings settings() const;
    // Re-simulates with the boxes' values (the Re-simulate button); `finished` follows.
    void run();
    // Whether it can run now (the session's file may have finished loading); live, the budget box
    // follows the run's target.
    void refresh();
    bool running() const { return worker_.joinable(); }
    // The last re-simulation that finished, if any.
    const std::optional<WhatIfResult>& result() const { return result_; }
    QTableWidget* table() const { return table_; }
    QLabel* summaryLabel() const { return summary_; }

  signals:
    void finished();

  private:
    void present(WhatIfResult result, std::uint64_t generation);
    void cancelRunning();
    void followTarget();

    const RunSession* session_ = nullptr;
    QDoubleSpinBox* bf16_;
    QDoubleSpinBox* int8_;
    QDoubleSpinBox* hysteresis_;
    QDoubleSpinBox* budget_;
    double shown_target_ = -1;  // the run's target as the budget box last took it
    QPushButton* run_;
    QLabel* summary_;
    QTableWidget* table_;
    std::thread worker_;
    std::shared_ptr<std::atomic<bool>> cancel_;  // the worker's; set to stop it
    std::uint64_t generation_ = 0;               // a result from an older generation is dropped
    std::optional<WhatIfResult> result_;
};

}  // namespace sp::ui
