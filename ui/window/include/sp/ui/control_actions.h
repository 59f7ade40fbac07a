#pragma once
// The operator's routing commands as actions (toolbar, menu, context menus, shortcuts): one Pin
// action per format, Release, Release all, the policy's mode and the budget target. The pins act on
// the current session's selected blocks; everything is enabled only when that session can send
// commands (live and heard from), and the result shows in the event log (pending → applied /
// rejected).
#include <array>
#include <functional>
#include <vector>

#include <QObject>

#include "sp/config.h"
#include "sp/precision.h"

class QAction;
class QActionGroup;
class QMenu;
class QPoint;
class QWidget;

namespace sp::ui {

class RunSession;

class ControlActions : public QObject {
    Q_OBJECT
  public:
    using SelectionProvider = std::function<std::vector<int>()>;
    // Asks the operator for a budget target in percent (a dialog in the window, a fixed value in
    // tests); returns false when cancelled.
    using TargetPrompt = std::function<bool(double& target_pct)>;
    // Asks the operator to confirm a risky pin (pin_risk.h), showing `text`; returns true to send.
    // Without one, a risky pin is not sent.
    using ConfirmPrompt = std::function<bool(const QString& text)>;
    ControlActions(SelectionProvider selection, QObject* parent);

    void setSession(RunSession* session);
    void setTargetPrompt(TargetPrompt prompt) { prompt_ = std::move(prompt); }
    void setConfirmPrompt(ConfirmPrompt confirm) { confirm_ = std::move(confirm); }
    // Re-evaluates which actions are enabled (session state, selection).
    void updateEnabled();

    QAction* pin(sp::Precision p) const { return pins_[std::size_t(p)]; }
    QAction* release() const { return release_; }
    QAction* releaseAll() const { return release_all_; }
    QAction* mode(sp::Mode m) const { return modes_[std::size_t(m)]; }
    QAction* budgetTarget() const { return budget_; }
    // The actions that act on selected blocks or on every pin (toolbar and context menu).
    std::vector<QAction*> blockActions() const;
    // Everything, for the Control menu and the shortcut list.
    std::vector<QAction*> all() const;

    // A context menu for `blocks` at `global_pos` (the selection is already `blocks`).
    void showContextMenu(const std::vector<int>& blocks, const QPoint& global_pos, QWidget* parent);

  signals:
    // A command could not be sent (not connected, replay); the text says why.
    void commandFailed(const QString& why);

  private:
    void sendPin(sp::Precision precision);

    SelectionProvider selection_;
    TargetPrompt prompt_;
    ConfirmPrompt confirm_;
    RunSession* session_ = nullptr;
    std::array<QAction*, kPrecisionCount> pins_{};
    QAction* release_;
    QAction* release_all_;
    std::array<QAction*, 4> modes_{};  // by Mode value: off, static, dynamic, budget
    QAction* budget_;
};

}  // namespace sp::ui
