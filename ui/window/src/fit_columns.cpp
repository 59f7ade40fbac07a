#include "fit_columns.h"

#include <algorithm>

#include <QEvent>
#include <QHeaderView>
#include <QScrollBar>
#include <QTableView>

namespace sp::ui {

ColumnFitter::ColumnFitter(QTableView* view) : QObject(view), view_(view) {
    QHeaderView* header = view->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Interactive);
    header->setStretchLastSection(false);  // a stretched last section is cut to the space left
    timer_.setSingleShot(true);
    timer_.setInterval(0);
    connect(&timer_, &QTimer::timeout, this, &ColumnFitter::fitNow);
    const QAbstractItemModel* model = view->model();
    connect(model, &QAbstractItemModel::rowsInserted, this, [this] { soon(false); });
    connect(model, &QAbstractItemModel::layoutChanged, this, [this] { soon(false); });
    connect(model, &QAbstractItemModel::rowsRemoved, this, [this] { soon(true); });
    connect(model, &QAbstractItemModel::modelReset, this, [this] { soon(true); });
    // A change out of view changes nothing shown: no fit (a refresh of every block's cells costs
    // nothing beyond the screenful in view).
    connect(model, &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex& top_left, const QModelIndex& bottom_right) {
                if (timer_.isActive()) return;
                const std::vector<int> rows = rowsInView();
                const bool seen = std::any_of(rows.begin(), rows.end(), [&](int r) {
                    return r >= top_left.row() && r <= bottom_right.row();
                });
                if (seen) soon(false);
            });
    connect(view->verticalScrollBar(), &QScrollBar::valueChanged, this, [this] { soon(false); });
    view->viewport()->installEventFilter(this);  // more rows in view after a resize
    soon(true);
}

bool ColumnFitter::eventFilter(QObject* watched, QEvent* event) {
    if (watched == view_->viewport() && event->type() == QEvent::Resize) soon(false);
    return QObject::eventFilter(watched, event);
}

void ColumnFitter::soon(bool afresh) {
    afresh_ = afresh_ || afresh;
    if (!timer_.isActive()) timer_.start();
}

std::vector<int> ColumnFitter::rowsInView() const {
    const QHeaderView* rows = view_->verticalHeader();
    const int count = rows->count();
    std::vector<int> out;
    if (count == 0) return out;
    const int height = std::max(view_->viewport()->height(), 1);
    const int first = std::max(rows->visualIndexAt(0), 0);
    int last = rows->visualIndexAt(height - 1);
    if (last < 0) {  // the rows end above the viewport's bottom (or the view was never laid out)
        const int per_row = std::max(rows->defaultSectionSize(), 1);
        last = std::min(count - 1, first + height / per_row);
    }
    out.reserve(std::size_t(last - first) + 1);
    for (int v = first; v <= last; ++v) {
        const int row = rows->logicalIndex(v);
        if (!rows->isSectionHidden(row)) out.push_back(row);
    }
    return out;
}

void ColumnFitter::fitNow() {
    timer_.stop();
    const bool afresh = std::exchange(afresh_, false);
    const QAbstractItemModel* model = view_->model();
    if (model == nullptr) return;
    QHeaderView* header = view_->horizontalHeader();
    const std::vector<int> rows = rowsInView();
    const int grid = view_->showGrid() ? 1 : 0;  // as QTableView::sizeHintForColumn counts it
    last_measured_ = 0;
    for (int column = 0; column < header->count(); ++column) {
        if (header->isSectionHidden(column)) continue;
        int width = header->sectionSizeHint(column);
        for (int row : rows) {
            const QModelIndex index = model->index(row, column, view_->rootIndex());
            width = std::max(width, view_->sizeHintForIndex(index).width() + grid);
            ++last_measured_;
        }
        if (!afresh) width = std::max(width, header->sectionSize(column));
        if (width != header->sectionSize(column)) header->resizeSection(column, width);
    }
    emit fitted();
}

ColumnFitter* keepColumnsFitted(QTableView* view) {
    return new ColumnFitter(view);
}

}  // namespace sp::ui
