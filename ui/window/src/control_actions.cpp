#include "sp/ui/control_actions.h"

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
      budget_(new QAction(tr("Budget target…"), this)) {
    for (sp::Precision p : kAllPrecisions) {
        const QString label = precisionLabel(p);
        QAction* a = new QAction(tr("Pin %1").arg(label), this);
        a->setShortcut(pinShortcut(p));
        a->setToolTip(p == sp::Precision::bf16
                          ? tr("Keep the selected blocks in BF16 until released (%1)")
                                .arg(a->shortcut().toString(QKeySequence::NativeText))
                          : tr("Route the selected blocks to %1 until released (%2)")
                                .arg(label, a->shortcut().toString(QKeySequence::NativeText)));
        connect(a, &QAction::triggered, this, [this, p] { sendPin(p); });
        pins_[std::size_t(p)] = a;
    }
    release_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    release_->setToolTip(tr("Give the selected blocks back to the policy (Ctrl+R)"));
    release_all_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
    release_all_->setToolTip(tr("Release every pin (Ctrl+Shift+R)"));
    for (sp::Mode m : {sp::Mode::dynamic, sp::Mode::budget, sp::Mode::static_, sp::Mode::off}) {
        const QString name = QString::fromUtf8(std::string(to_string(m)).c_str());
        QAction* a = new QAction(tr("Mode: %1").arg(name), this);
        a->setToolTip(tr("Switch the policy to mode %1 (sp-ctl mode %1)").arg(name));
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
        double target = 50.0;
        if (session_ == nullptr || !prompt_ || !prompt_(target)) return;
        sp::Command c;
        c.kind = sp::Command::Kind::set_budget;
        c.target_pct = target;
        if (session_->send(c).isEmpty())
            emit commandFailed(tr("The budget target was not sent: the agent is not connected."));
    });
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

std::vector<QAction*> ControlActions::all() const {
    std::vector<QAction*> out = blockActions();
    for (sp::Mode m : {sp::Mode::dynamic, sp::Mode::budget, sp::Mode::static_, sp::Mode::off})
        out.push_back(modes_[std::size_t(m)]);
    out.push_back(budget_);
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
    budget_->setEnabled(control);
    const QString why = session_ == nullptr   ? tr("No run open")
                        : !session_->isLive() ? tr("Replay is read-only")
                        : !control            ? tr("The agent is not connected")
                                              : QString();
    for (QAction* a : all()) a->setStatusTip(why);
}

void ControlActions::showContextMenu(const std::vector<int>& blocks, const QPoint& global_pos,
                                     QWidget* parent) {
    updateEnabled();
    QMenu menu(parent);
    const QString title =
        blocks.size() == 1 ? tr("Block %1").arg(blocks.front()) : tr("%1 blocks").arg(blocks.size());
    menu.addSection(title);
    for (QAction* a : blockActions()) menu.addAction(a);
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
    if (session_->pin(blocks, precision).isEmpty())
        emit commandFailed(tr("Pin was not sent: the agent is not connected."));
}

}  // namespace sp::ui
