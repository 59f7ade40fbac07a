#include "sp/ui/block_table_panel.h"

#include <QHeaderView>
#include <QItemSelection>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "fit_columns.h"
#include "sp/ui/block_table_model.h"

namespace sp::ui {

BlockTablePanel::BlockTablePanel(QWidget* parent)
    : QWidget(parent),
      proxy_(new QSortFilterProxyModel(this)),
      filter_(new QLineEdit(this)),
      view_(new QTableView(this)) {
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    proxy_->setFilterKeyColumn(-1);                  // name, precision, "pin: int8", ... all match
    proxy_->setSortRole(BlockTableModel::SortRole);  // raw numbers: 10 sorts after 9
    filter_->setPlaceholderText(tr("Filter blocks (name, precision, pin…)"));
    filter_->setClearButtonEnabled(true);
    view_->setModel(proxy_);
    view_->setSortingEnabled(true);
    view_->sortByColumn(BlockTableModel::IdColumn, Qt::AscendingOrder);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    view_->setAlternatingRowColors(true);
    view_->setContextMenuPolicy(Qt::CustomContextMenu);
    view_->verticalHeader()->hide();
    view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 6);
    keepColumnsFitted(view_);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(filter_);
    layout->addWidget(view_);

    connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
    // The filter's rows change with its text and, filtering on live values, as data arrives.
    connect(filter_, &QLineEdit::textChanged, this, &BlockTablePanel::announceShownBlocks);
    connect(proxy_, &QAbstractItemModel::rowsInserted, this, &BlockTablePanel::announceShownBlocks);
    connect(proxy_, &QAbstractItemModel::rowsRemoved, this, &BlockTablePanel::announceShownBlocks);
    connect(proxy_, &QAbstractItemModel::modelReset, this, &BlockTablePanel::announceShownBlocks);
    connect(proxy_, &QAbstractItemModel::layoutChanged, this, &BlockTablePanel::announceShownBlocks);
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        if (!syncing_) emit selectionChanged(selectedBlocks());
    });
    connect(view_, &QTableView::customContextMenuRequested, this, [this](const QPoint& pos) {
        const std::vector<int> blocks = selectedBlocks();
        if (!blocks.empty()) emit contextMenuRequested(blocks, view_->viewport()->mapToGlobal(pos));
    });
}

void BlockTablePanel::setModel(QAbstractItemModel* model) {
    model_ = model;
    proxy_->setSourceModel(model);
}

std::optional<std::vector<int>> BlockTablePanel::shownBlocks() const {
    if (filter_->text().isEmpty()) return std::nullopt;
    std::vector<int> blocks;
    blocks.reserve(std::size_t(proxy_->rowCount()));
    for (int r = 0; r < proxy_->rowCount(); ++r)
        blocks.push_back(proxy_->mapToSource(proxy_->index(r, 0)).row());
    std::sort(blocks.begin(), blocks.end());  // block order (the table's sort is its own)
    return blocks;
}

void BlockTablePanel::announceShownBlocks() {
    std::optional<std::vector<int>> blocks = shownBlocks();
    if (blocks == announced_) return;
    announced_ = std::move(blocks);
    emit shownBlocksChanged(announced_);
}

std::vector<int> BlockTablePanel::selectedBlocks() const {
    std::vector<int> blocks;
    for (const QModelIndex& index : view_->selectionModel()->selectedRows())
        blocks.push_back(proxy_->mapToSource(index).row());
    std::sort(blocks.begin(), blocks.end());
    return blocks;
}

void BlockTablePanel::setSelectedBlocks(const std::vector<int>& blocks) {
    if (model_ == nullptr) return;
    syncing_ = true;
    QItemSelection selection;
    const int last_column = model_->columnCount() - 1;
    for (int block : blocks) {
        if (block < 0 || block >= model_->rowCount()) continue;
        const QModelIndex first = proxy_->mapFromSource(model_->index(block, 0));
        const QModelIndex last = proxy_->mapFromSource(model_->index(block, last_column));
        if (first.isValid()) selection.select(first, last);
    }
    view_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
    if (!selection.isEmpty()) view_->scrollTo(selection.indexes().first());
    syncing_ = false;
}

}  // namespace sp::ui
