#include "sp/ui/event_log_panel.h"

#include <QAction>
#include <QColor>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include "fit_columns.h"
#include "sp/ui/event_log.h"
#include "sp/ui/event_log_filter.h"
#include "sp/ui/event_log_model.h"

namespace sp::ui {

namespace {

// Colour is the view's business: command states and alarming categories stand out.
class ColouredEvents : public EventLogFilter {
  public:
    using EventLogFilter::EventLogFilter;
    QVariant data(const QModelIndex& index, int role) const override {
        if (role != Qt::ForegroundRole) return EventLogFilter::data(index, role);
        const auto state = static_cast<CommandState>(index.data(EventLogModel::CommandStateRole).toInt());
        switch (state) {
            case CommandState::pending:
                return QColor(0xd2, 0x99, 0x22);
            case CommandState::applied:
                return QColor(0x3f, 0xb9, 0x50);
            case CommandState::rejected:
                return QColor(0xf8, 0x51, 0x49);
            case CommandState::unconfirmed:  // as alarming as a warning: check the next update
                return QColor(0xe3, 0x7b, 0x40);
            case CommandState::none:
                break;
        }
        const auto category = static_cast<EventCategory>(index.data(EventLogModel::CategoryRole).toInt());
        if (category == EventCategory::rollback || category == EventCategory::dropped ||
            category == EventCategory::warning || category == EventCategory::load)
            return QColor(0xe3, 0x7b, 0x40);
        return EventLogFilter::data(index, role);
    }
};

}  // namespace

EventLogPanel::EventLogPanel(QWidget* parent)
    : QWidget(parent),
      proxy_(new ColouredEvents(this)),
      category_(new QComboBox(this)),
      view_(new QTableView(this)) {
    category_->addItem(tr("All events"), -1);
    for (EventCategory c : {EventCategory::precision_change, EventCategory::command, EventCategory::rollback,
                            EventCategory::connection, EventCategory::dropped, EventCategory::warning,
                            EventCategory::load, EventCategory::other})
        category_->addItem(toString(c), static_cast<int>(c));
    view_->setModel(proxy_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setAlternatingRowColors(true);
    view_->setWordWrap(false);
    view_->verticalHeader()->hide();
    view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 4);
    // The message last: it is the long one, and a command's state stays next to its kind.
    keepColumnsFitted(view_);
    QHeaderView* header = view_->horizontalHeader();
    header->moveSection(header->visualIndex(EventLogModel::StateColumn),
                        header->visualIndex(EventLogModel::MessageColumn));

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Show:"), this));
    top->addWidget(category_);
    top->addStretch(1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(top);
    layout->addWidget(view_);

    connect(category_, &QComboBox::currentIndexChanged, this, [this](int i) {
        const int category = category_->itemData(i).toInt();
        proxy_->setCategory(
            category < 0 ? std::nullopt : std::optional<EventCategory>(static_cast<EventCategory>(category)));
    });
    connect(view_, &QAbstractItemView::doubleClicked, this, [this](const QModelIndex& index) {
        const qlonglong step = index.data(EventLogModel::StepRole).toLongLong();
        if (step >= 0) emit stepActivated(step);
    });
    // Follow the newest entry unless the user scrolled up to read something.
    connect(proxy_, &QAbstractItemModel::rowsInserted, this, [this] {
        QScrollBar* bar = view_->verticalScrollBar();
        if (bar->value() >= bar->maximum() - 2) view_->scrollToBottom();
    });
}

void EventLogPanel::setStepLimit(std::optional<std::int64_t> step) {
    proxy_->setStepLimit(step);
}

void EventLogPanel::addContextAction(QAction* action) {
    view_->setContextMenuPolicy(Qt::ActionsContextMenu);
    view_->addAction(action);
}

void EventLogPanel::setModel(QAbstractItemModel* model) {
    proxy_->setSourceModel(model);
    view_->scrollToBottom();
}

}  // namespace sp::ui
