#pragma once
// The operator's routing commands as actions (toolbar, menu, context menus, shortcuts):
// Pin BF16, Pin INT8, Release, Release all. They act on the current session's selected blocks,
// are enabled only when that session can send commands (live and heard from), and the result
// shows in the event log (pending → applied / rejected).
#include <functional>
#include <vector>

#include <QObject>

class QAction;
class QMenu;
class QPoint;

namespace sp::ui {

class RunSession;

class ControlActions : public QObject {
    Q_OBJECT
  public:
    using SelectionProvider = std::function<std::vector<int>()>;
    ControlActions(SelectionProvider selection, QObject* parent);

    void setSession(RunSession* session);
    // Re-evaluates which actions are enabled (session state, selection).
    void updateEnabled();

    QAction* pinBf16() const { return pinBf16_; }
    QAction* pinInt8() const { return pinInt8_; }
    QAction* release() const { return release_; }
    QAction* releaseAll() const { return releaseAll_; }
    std::vector<QAction*> all() const { return {pinBf16_, pinInt8_, release_, releaseAll_}; }

    // A context menu for `blocks` at `globalPos` (the selection is already `blocks`).
    void showContextMenu(const std::vector<int>& blocks, const QPoint& globalPos, QWidget* parent);

  signals:
    // A command could not be sent (not connected, replay); the text says why.
    void commandFailed(const QString& why);

  private:
    void pin(int precision);

    SelectionProvider selection_;
    RunSession* session_ = nullptr;
    QAction* pinBf16_;
    QAction* pinInt8_;
    QAction* release_;
    QAction* releaseAll_;
};

}  // namespace sp::ui
