#include "sp/ui/control_actions.h"

#include <algorithm>

#include <QAction>
#include <QKeySequence>
#include <QMenu>

#include "sp/ui/colormap.h"
#include "sp/ui/pin_risk.h"
#include "sp/ui/run_session.h"

namespace sp::ui {
namespace {

// Ctrl+B BF16, Ctrl+I INT8, Ctrl+4 INT4, Ctrl+E FP8 E4M3, Ctrl+Shift+E FP8 E5M2.
QKeySequence pinShortcut(sp::Precision p) {
    switch (p) {
        case sp::Precision::bf16:
            return QKeySequence(Qt::CTRL | Qt::Key_B);
        case sp::Precision::int8:
            return QKeySequence(Qt::CTRL | Qt::Key_I);
        case sp::Precision::int4:
            return QKeySequence(Qt::CTRL | Qt::Key_4);
        case sp::Precision::fp8_e4m3:
            return QKeySequence(Qt::CTRL | Qt::Key_E);
        case sp::Precision::fp8_e5m2:
            return QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E);
    }
    return {};
}

}  // namespace

ControlActions::ControlActions(SelectionProvider selection, QObject* parent)
    : QObject(parent),
      selection_(std::move(selection)),
      release_(new QAction(tr("Release"), this)),
      release_all_(new QAction(tr("Release all"), this)),
      budget_(new QAction(tr("Budget target…"), this)),
      tolerance_(new QAction(tr("Loss tolerance…"), this)),
      lifetime_(new QAction(this)),
      on_spike_(new QAction(tr("Pins release on a loss spike"), this)) {
    for (sp::Precision p : kAllPrecisions) {
        const QString label = precisionLabel(p);
        QAction* a = new QAction(tr("Pin %1").arg(label), this);
        a->setShortcut(pinShortcut(p));
        connect(a, &QAction::triggered, this, [this, p] { sendPin(p); });
        pins_[std::size_t(p)] = a;
    }
    release_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    release_->setToolTip(tr("Give the selected blocks back to the policy (Ctrl+R)"));
    release_all_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
    release_all_->setToolTip(tr("Release every pin (Ctrl+Shift+R)"));
    for (sp::Mode m : kMenuModes) {
        const QString name = QString::fromUtf8(std::string(to_string(m)).c_str());
        QAction* a = new QAction(tr("Mode: %1").arg(name), this);
        a->setToolTip(tr("Switch the policy to mode %1 (sp-ctl mode %1)").arg(name));
        // Checked: the mode in force, as the run last said it (updateEnabled keeps it so; a click
        // that is refused or not yet applied is undone there).
        a->setCheckable(true);
        connect(a, &QAction::triggered, this, [this, m] {
            sp::Command c;
            c.kind = sp::Command::Kind::set_mode;
            c.mode = m;
            if (session_ != nullptr && session_->send(c).isEmpty())
                emit commandFailed(tr("The mode switch was not sent: the agent is not connected."));
        });
        modes_[std::size_t(m)] = a;
    }
    budget_->setToolTip(
        tr("Set the budget mode's target saving against all-BF16, in percent (sp-ctl budget)"));
    connect(budget_, &QAction::triggered, this, [this] {
        if (session_ == nullptr || !prompt_) return;
        double target = session_->budgetTargetPct();  // the dialog opens at the agent's target
        if (!prompt_(target)) return;
        sp::Command c;
        c.kind = sp::Command::Kind::set_budget;
        c.target_pct = target;
        if (session_->send(c).isEmpty())
            emit commandFailed(tr("The budget target was not sent: the agent is not connected."));
    });
    tolerance_->setToolTip(
        tr("Set the tolerance mode's loss tolerance: the estimated increase of the training loss the plan "
           "may cost, in percent (sp-ctl tolerance)"));
    connect(tolerance_, &QAction::triggered, this, [this] {
        if (session_ == nullptr || !tolerance_prompt_) return;
        double pct = session_->lossTolerancePct();  // the dialog opens at the agent's tolerance
        if (!tolerance_prompt_(pct)) return;
        sp::Command c;
        c.kind = sp::Command::Kind::set_tolerance;
        c.tolerance_pct = pct;
        if (session_->send(c).isEmpty())
            emit commandFailed(tr("The loss tolerance was not sent: the agent is not connected."));
    });
    lifetime_->setToolTip(
        tr("How long the pins sent from now on last: a number of steps, or until released"));
    connect(lifetime_, &QAction::triggered, this, [this] {
        std::int64_t steps = pin_for_steps_;
        if (lifetime_prompt_ && lifetime_prompt_(steps)) setPinTerms(steps, pinReleasesOnSpike());
    });
    on_spike_->setCheckable(true);
    on_spike_->setToolTip(
        tr("Pins sent from now on end by themselves on a loss spike; a block pinned below BF16 goes back "
           "to BF16, as a rollback would move it"));
    connect(on_spike_, &QAction::toggled, this, [this] { describePinTerms(); });
    describePinTerms();
    for (QAction* a : all()) a->setShortcutContext(Qt::WindowShortcut);

    connect(release_, &QAction::triggered, this, [this] {
        const std::vector<int> blocks = selection_();
        if (session_ != nullptr && !blocks.empty() && session_->release(blocks).isEmpty())
            emit commandFailed(tr("Release was not sent: the agent is not connected."));
    });
    connect(release_all_, &QAction::triggered, this, [this] {
        if (session_ != nullptr && session_->releaseAll().isEmpty())
            emit commandFailed(tr("Release all was not sent: the agent is not connected."));
    });
    updateEnabled();
}

std::vector<QAction*> ControlActions::blockActions() const {
    std::vector<QAction*> out(pins_.begin(), pins_.end());
    out.push_back(release_);
    out.push_back(release_all_);
    return out;
}

bool ControlActions::pinReleasesOnSpike() const {
    return on_spike_->isChecked();
}

void ControlActions::setPinTerms(std::int64_t for_steps, bool release_on_spike) {
    pin_for_steps_ = std::max<std::int64_t>(0, for_steps);
    on_spike_->setChecked(release_on_spike);  // toggled() describes them when it changed
    describePinTerms();
}

void ControlActions::describePinTerms() {
    const QString lifetime =
        pin_for_steps_ > 0 ? tr("for %1 steps").arg(pin_for_steps_) : tr("until released");
    lifetime_->setText(tr("Pin lifetime: %1…").arg(lifetime));
    const QString terms = lifetime + (on_spike_->isChecked() ? tr(" or a loss spike") : QString());
    for (sp::Precision p : kAllPrecisions) {
        QAction* a = pins_[std::size_t(p)];
        const QString keys = a->shortcut().toString(QKeySequence::NativeText);
        a->setToolTip(
            p == sp::Precision::bf16
                ? tr("Keep the selected blocks in BF16 %1 (%2)").arg(terms, keys)
                : tr("Route the selected blocks to %1 %2 (%3)").arg(precisionLabel(p), terms, keys));
    }
}

std::vector<QAction*> ControlActions::all() const {
    std::vector<QAction*> out = blockActions();
    for (sp::Mode m : kMenuModes) out.push_back(modes_[std::size_t(m)]);
    out.push_back(budget_);
    out.push_back(tolerance_);
    out.push_back(lifetime_);
    out.push_back(on_spike_);
    return out;
}

void ControlActions::setSession(RunSession* session) {
    session_ = session;
    updateEnabled();
}

void ControlActions::updateEnabled() {
    const bool control = session_ != nullptr && session_->canControl();
    const bool selected = control && !selection_().empty();
    for (QAction* a : pins_) a->setEnabled(selected);
    release_->setEnabled(selected);
    release_all_->setEnabled(control);
    for (QAction* a : modes_) a->setEnabled(control);
    // The pins' terms only shape pins sent from here: off where no pin can be sent (a replay).
    lifetime_->setEnabled(control);
    on_spike_->setEnabled(control);
    for (sp::Mode m : kMenuModes)
        modes_[std::size_t(m)]->setChecked(session_ != nullptr && session_->policyMode() == m);
    budget_->setEnabled(control);
    tolerance_->setEnabled(control);
    const QString why = session_ == nullptr   ? tr("No run open")
                        : !session_->isLive() ? tr("Replay is read-only")
                        : !control            ? tr("The agent is not connected")
                                              : QString();
    for (QAction* a : all())
        if (a != lifetime_ && a != on_spike_) a->setStatusTip(why);  // those two are settings, always open
}

void ControlActions::showContextMenu(const std::vector<int>& blocks, const QPoint& global_pos,
                                     QWidget* parent) {
    updateEnabled();
    QMenu menu(parent);
    const QString title =
        blocks.size() == 1 ? tr("Block %1").arg(blocks.front()) : tr("%1 blocks").arg(blocks.size());
    menu.addSection(title);
    for (QAction* a : blockActions()) menu.addAction(a);
    menu.addSeparator();
    menu.addAction(lifetime_);
    menu.addAction(on_spike_);
    if (session_ == nullptr || !session_->canControl()) {
        menu.addSeparator();
        menu.addAction(session_ != nullptr && !session_->isLive() ? tr("Replay is read-only")
                                                                  : tr("Not connected to an agent"))
            ->setEnabled(false);
    }
    menu.exec(global_pos);
}

void ControlActions::sendPin(sp::Precision precision) {
    const std::vector<int> blocks = selection_();
    if (session_ == nullptr || blocks.empty()) return;
    // Against the policy's BF16 threshold: the operator confirms, having seen what it costs.
    const std::vector<PinRisk> risks = riskyPins(*session_, blocks, precision);
    if (!risks.empty()) {
        const QString text =
            QString::fromStdString(describeRisks(risks, precision, session_->runConfig().bf16_threshold));
        if (!confirm_ || !confirm_(text)) {
            emit commandFailed(tr("Pin cancelled: not confirmed."));
            return;
        }
    }
    sp::Command c;
    c.kind = sp::Command::Kind::pin;
    c.blocks = blocks;
    c.precision = precision;
    c.for_steps = pin_for_steps_;
    c.release_on_spike = pinReleasesOnSpike();
    if (session_->send(c).isEmpty()) emit commandFailed(tr("Pin was not sent: the agent is not connected."));
}

}  // namespace sp::ui
