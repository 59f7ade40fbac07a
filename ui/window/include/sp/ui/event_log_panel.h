#pragma once
// The event log: newest at the bottom (kept in view unless the user scrolled up), a category
// filter, command states coloured (pending / applied / rejected). It follows the timeline: with a
// step limit (the cursor's step, in replay) later entries are hidden; double-clicking an entry asks
// to move the timeline to its step.
#include <cstdint>
#include <optional>

#include <QWidget>

class QAbstractItemModel;
class QAction;
class QComboBox;
class QTableView;

namespace sp::ui {

class EventLogFilter;

class EventLogPanel : public QWidget {
    Q_OBJECT
  public:
    explicit EventLogPanel(QWidget* parent = nullptr);
    // An EventLogModel; null shows nothing.
    void setModel(QAbstractItemModel* model);
    QTableView* view() const { return view_; }
    // Hides entries of later steps (entries without a step always show); nullopt shows all.
    void setStepLimit(std::optional<std::int64_t> step);
    // Offers `action` in the log's context menu (the window's Export event log…).
    void addContextAction(QAction* action);

  signals:
    // The user asked to go to this entry's step (never emitted for entries without one).
    void stepActivated(qint64 step);

  private:
    EventLogFilter* proxy_;
    QComboBox* category_;
    QTableView* view_;
};

}  // namespace sp::ui
