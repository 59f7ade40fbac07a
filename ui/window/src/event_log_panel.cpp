#include "sp/ui/event_log_panel.h"

#include <QAction>
#include <QColor>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include "fit_columns.h"
#include "sp/ui/event_log.h"
#include "sp/ui/event_log_model.h"

namespace sp::ui {

namespace {

// Keeps rows of one category (or all, category < 0).
class CategoryFilter : public QSortFilterProxyModel {
  public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setCategory(int category) {
        category_ = category;
        invalidateRowsFilter();
    }
    void setStepLimit(std::optional<std::int64_t> step) {
        if (step == step_limit_) return;
        step_limit_ = step;
        invalidateRowsFilter();
    }

    // Colour is the view's business: command states and alarming categories stand out.
    QVariant data(const QModelIndex& index, int role) const override {
        if (role != Qt::ForegroundRole) return QSortFilterProxyModel::data(index, role);
        const auto state = static_cast<CommandState>(index.data(EventLogModel::CommandStateRole).toInt());
        switch (state) {
            case CommandState::pending:
                return QColor(0xd2, 0x99, 0x22);
            case CommandState::applied:
                return QColor(0x3f, 0xb9, 0x50);
            case CommandState::rejected:
                return QColor(0xf8, 0x51, 0x49);
            case CommandState::none:
                break;
        }
        const auto category = static_cast<EventCategory>(index.data(EventLogModel::CategoryRole).toInt());
        if (category == EventCategory::rollback || category == EventCategory::dropped ||
            category == EventCategory::warning || category == EventCategory::load)
            return QColor(0xe3, 0x7b, 0x40);
        return QSortFilterProxyModel::data(index, role);
    }

  protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
        const QModelIndex index = sourceModel()->index(row, 0, parent);
        if (step_limit_ && index.data(EventLogModel::StepRole).toLongLong() > *step_limit_) return false;
        return category_ < 0 || index.data(EventLogModel::CategoryRole).toInt() == category_;
    }

  private:
    int category_ = -1;
    std::optional<std::int64_t> step_limit_;
};

}  // namespace

EventLogPanel::EventLogPanel(QWidget* parent)
    : QWidget(parent),
      proxy_(new CategoryFilter(this)),
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
        static_cast<CategoryFilter*>(proxy_)->setCategory(category_->itemData(i).toInt());
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
    static_cast<CategoryFilter*>(proxy_)->setStepLimit(step);
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
