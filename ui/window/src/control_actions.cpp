#include "sp/ui/control_actions.h"

#include <QAction>
#include <QKeySequence>
#include <QMenu>

#include "sp/ui/run_session.h"

namespace sp::ui {

ControlActions::ControlActions(SelectionProvider selection, QObject* parent)
    : QObject(parent),
      selection_(std::move(selection)),
      pinBf16_(new QAction(tr("Pin BF16"), this)),
      pinInt8_(new QAction(tr("Pin INT8"), this)),
      release_(new QAction(tr("Release"), this)),
      releaseAll_(new QAction(tr("Release all"), this)) {
    pinBf16_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_B));
    pinBf16_->setToolTip(tr("Keep the selected blocks in BF16 until released (Ctrl+B)"));
    pinInt8_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_I));
    pinInt8_->setToolTip(tr("Route the selected blocks to INT8 until released (Ctrl+I)"));
    release_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    release_->setToolTip(tr("Give the selected blocks back to the policy (Ctrl+R)"));
    releaseAll_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
    releaseAll_->setToolTip(tr("Release every pin (Ctrl+Shift+R)"));
    for (QAction* a : all()) a->setShortcutContext(Qt::WindowShortcut);

    connect(pinBf16_, &QAction::triggered, this, [this] { pin(static_cast<int>(sp::Precision::bf16)); });
    connect(pinInt8_, &QAction::triggered, this, [this] { pin(static_cast<int>(sp::Precision::int8)); });
    connect(release_, &QAction::triggered, this, [this] {
        const std::vector<int> blocks = selection_();
        if (session_ != nullptr && !blocks.empty() && session_->release(blocks).isEmpty())
            emit commandFailed(tr("Release was not sent: the agent is not connected."));
    });
    connect(releaseAll_, &QAction::triggered, this, [this] {
        if (session_ != nullptr && session_->releaseAll().isEmpty())
            emit commandFailed(tr("Release all was not sent: the agent is not connected."));
    });
    updateEnabled();
}

void ControlActions::setSession(RunSession* session) {
    session_ = session;
    updateEnabled();
}

void ControlActions::updateEnabled() {
    const bool control = session_ != nullptr && session_->canControl();
    const bool selected = control && !selection_().empty();
    pinBf16_->setEnabled(selected);
    pinInt8_->setEnabled(selected);
    release_->setEnabled(selected);
    releaseAll_->setEnabled(control);
    const QString why = session_ == nullptr   ? tr("No run open")
                        : !session_->isLive() ? tr("Replay is read-only")
                        : !control            ? tr("The agent is not connected")
                                              : QString();
    for (QAction* a : all()) a->setStatusTip(why);
}

void ControlActions::showContextMenu(const std::vector<int>& blocks, const QPoint& globalPos,
                                     QWidget* parent) {
    updateEnabled();
    QMenu menu(parent);
    const QString title =
        blocks.size() == 1 ? tr("Block %1").arg(blocks.front()) : tr("%1 blocks").arg(blocks.size());
    menu.addSection(title);
    for (QAction* a : all()) menu.addAction(a);
    if (session_ == nullptr || !session_->canControl()) {
        menu.addSeparator();
        menu.addAction(session_ != nullptr && !session_->isLive() ? tr("Replay is read-only")
                                                                  : tr("Not connected to an agent"))
            ->setEnabled(false);
    }
    menu.exec(globalPos);
}

void ControlActions::pin(int precision) {
    const std::vector<int> blocks = selection_();
    if (session_ == nullptr || blocks.empty()) return;
    if (session_->pin(blocks, static_cast<sp::Precision>(precision)).isEmpty())
        emit commandFailed(tr("Pin was not sent: the agent is not connected."));
}

}  // namespace sp::ui
