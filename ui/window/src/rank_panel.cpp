#include "sp/ui/rank_panel.h"

#include <algorithm>

#include <QColor>
#include <QHeaderView>
#include <QIdentityProxyModel>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include "fit_columns.h"
#include "sp/ui/rank_status_model.h"

namespace sp::ui {
namespace {

// Colour is the view's business: the cells behind a warning in the warning bar's amber.
class WarnedCells : public QIdentityProxyModel {
  public:
    using QIdentityProxyModel::QIdentityProxyModel;
    QVariant data(const QModelIndex& index, int role) const override {
        if (role == Qt::ForegroundRole && index.data(RankStatusModel::WarnedRole).toBool())
            return QColor(0xd2, 0x99, 0x22);
        return QIdentityProxyModel::data(index, role);
    }
};

}  // namespace

RankPanel::RankPanel(QWidget* parent)
    : QWidget(parent), proxy_(new WarnedCells(this)), view_(new QTableView(this)) {
    setObjectName(QStringLiteral("RankPanel"));
    view_->setModel(proxy_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view_->setAlternatingRowColors(true);
    view_->verticalHeader()->hide();
    keepColumnsFitted(view_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(view_);
}

int RankPanel::fittingHeight() const {
    const int rows = std::min(view_->model()->rowCount(), kRowsShown);
    const int scroll_bar = view_->horizontalScrollBar()->sizeHint().height();
    return view_->horizontalHeader()->sizeHint().height() +
           rows * view_->verticalHeader()->defaultSectionSize() + 2 * view_->frameWidth() + scroll_bar;
}

void RankPanel::setModel(RankStatusModel* model) {
    model_ = model;
    proxy_->setSourceModel(model);
    setMinimumHeight(model != nullptr ? fittingHeight() : 0);  // every rank in view (up to kRowsShown)
}

}  // namespace sp::ui
