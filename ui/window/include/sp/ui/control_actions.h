#pragma once
// The operator's routing commands as actions (toolbar, menu, context menus, shortcuts): one Pin
// action per format, Release, Release all, the policy's mode, the budget target and the loss tolerance. The
// pins act on the current session's selected blocks; everything is enabled only when that session can send
// commands (live and heard from), and the result shows in the event log (pending → applied /
// rejected).
#include <array>
#include <cstdint>
#include <functional>
#include <iterator>
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

// The modes in the Control menu's order.
inline constexpr sp::Mode kMenuModes[] = {sp::Mode::dynamic, sp::Mode::budget, sp::Mode::tolerance,
                                          sp::Mode::static_, sp::Mode::off};
inline constexpr std::size_t kModeCount = std::size(kMenuModes);

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
    // Asks for the lifetime of the pins sent from now on, in steps (0: until released); returns
    // false when cancelled.
    using LifetimePrompt = std::function<bool(std::int64_t& steps)>;
    ControlActions(SelectionProvider selection, QObject* parent);

    void setSession(RunSession* session);
    void setTargetPrompt(TargetPrompt prompt) { prompt_ = std::move(prompt); }
    // Asks for the tolerance mode's loss tolerance in percent, as TargetPrompt asks for a target.
    void setTolerancePrompt(TargetPrompt prompt) { tolerance_prompt_ = std::move(prompt); }
    void setConfirmPrompt(ConfirmPrompt confirm) { confirm_ = std::move(confirm); }
    void setLifetimePrompt(LifetimePrompt prompt) { lifetime_prompt_ = std::move(prompt); }
    // The terms every pin sent from here carries (POLICY.md rule 20): ends by itself after
    // `for_steps` steps (0: until released), and is released by a loss spike.
    void setPinTerms(std::int64_t for_steps, bool release_on_spike);
    std::int64_t pinForSteps() const { return pin_for_steps_; }
    bool pinReleasesOnSpike() const;
    // Re-evaluates which actions are enabled (session state, selection).
    void updateEnabled();

    QAction* pin(sp::Precision p) const { return pins_[std::size_t(p)]; }
    QAction* release() const { return release_; }
    QAction* releaseAll() const { return release_all_; }
    QAction* mode(sp::Mode m) const { return modes_[std::size_t(m)]; }
    QAction* budgetTarget() const { return budget_; }
    QAction* lossTolerance() const { return tolerance_; }
    QAction* pinLifetime() const { return lifetime_; }     // asks for the pins' lifetime
    QAction* releaseOnSpike() const { return on_spike_; }  // checkable
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
    void describePinTerms();  // the terms in the lifetime action's text and the pins' tooltips

    SelectionProvider selection_;
    TargetPrompt prompt_;
    TargetPrompt tolerance_prompt_;
    ConfirmPrompt confirm_;
    LifetimePrompt lifetime_prompt_;
    std::int64_t pin_for_steps_ = 0;
    RunSession* session_ = nullptr;
    std::array<QAction*, kPrecisionCount> pins_{};
    QAction* release_;
    QAction* release_all_;
    std::array<QAction*, kModeCount> modes_{};  // by Mode value: off, static, dynamic, budget, tolerance
    QAction* budget_;
    QAction* tolerance_;
    QAction* lifetime_;
    QAction* on_spike_;
};

}  // namespace sp::ui
