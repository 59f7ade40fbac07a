#pragma once
// The what-if panel: change the run's thresholds (or budget target), re-simulate the replayed file
// in process (what_if.h, on a worker thread) and compare with what was recorded: the mean estimated
// saving, the switches, and each block's final precision side by side. Needs a replayed file written
// with per-step statistics (sp-trainer --every-step-stats); otherwise it says so.
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
    ~WhatIfPanel() override;  // waits for a re-simulation in flight

    // The run to try thresholds on; the boxes take its config's values.
    void setSession(const RunSession* session);
    void setSettings(const WhatIfSettings& s);
    WhatIfSettings settings() const;
    // Re-simulates with the boxes' values (the Re-simulate button); `finished` follows.
    void run();
    // Whether it can run now (the session's file may have finished loading).
    void refresh();
    // The last re-simulation that finished, if any.
    const std::optional<WhatIfResult>& result() const { return result_; }
    QTableWidget* table() const { return table_; }
    QLabel* summaryLabel() const { return summary_; }

  signals:
    void finished();

  private:
    void present(WhatIfResult result);

    const RunSession* session_ = nullptr;
    QDoubleSpinBox* bf16_;
    QDoubleSpinBox* int8_;
    QDoubleSpinBox* hysteresis_;
    QDoubleSpinBox* budget_;
    QPushButton* run_;
    QLabel* summary_;
    QTableWidget* table_;
    std::thread worker_;
    std::optional<WhatIfResult> result_;
};

}  // namespace sp::ui
