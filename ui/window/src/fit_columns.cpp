#include "fit_columns.h"

#include <QHeaderView>
#include <QScrollBar>
#include <QTableView>
#include <QTimer>

namespace sp::ui {

void keepColumnsFitted(QTableView* view) {
    QHeaderView* header = view->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setStretchLastSection(false);  // a stretched last section is cut to the space left
    auto* timer = new QTimer(view);
    timer->setSingleShot(true);
    timer->setInterval(0);
    QObject::connect(timer, &QTimer::timeout, view, [view] { view->resizeColumnsToContents(); });
    const auto soon = [timer] {
        if (!timer->isActive()) timer->start();
    };
    const QAbstractItemModel* model = view->model();
    QObject::connect(model, &QAbstractItemModel::rowsInserted, timer, soon);
    QObject::connect(model, &QAbstractItemModel::rowsRemoved, timer, soon);
    QObject::connect(model, &QAbstractItemModel::modelReset, timer, soon);
    QObject::connect(model, &QAbstractItemModel::layoutChanged, timer, soon);
    QObject::connect(model, &QAbstractItemModel::dataChanged, timer, soon);
    QObject::connect(view->verticalScrollBar(), &QScrollBar::valueChanged, timer, soon);
}

}  // namespace sp::ui
