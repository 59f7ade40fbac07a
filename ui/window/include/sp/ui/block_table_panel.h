#pragma once
// The block table: sortable, filterable by name or precision, selection shared with the heatmap,
// a context menu for operator commands. The data is BlockTableModel's (one row per block id).
// The filter's result is announced (shownBlocksChanged) so the heatmap can show the same blocks.
#include <optional>
#include <vector>

#include <QWidget>

class QAbstractItemModel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace sp::ui {

class BlockTablePanel : public QWidget {
    Q_OBJECT
  public:
    explicit BlockTablePanel(QWidget* parent = nullptr);

    // A BlockTableModel (one row per block, row == block id); null shows nothing.
    void setModel(QAbstractItemModel* model);

    std::vector<int> selectedBlocks() const;
    // From the heatmap; does not emit selectionChanged.
    void setSelectedBlocks(const std::vector<int>& blocks);
    QTableView* view() const { return view_; }
    QLineEdit* filterEdit() const { return filter_; }
    // The blocks the filter lets through, ascending; nullopt while the filter is empty (all).
    std::optional<std::vector<int>> shownBlocks() const;
    QAbstractItemModel* sourceModel() const { return model_; }

  signals:
    void selectionChanged(const std::vector<int>& blocks);
    void contextMenuRequested(const std::vector<int>& blocks, const QPoint& global_pos);
    // shownBlocks() changed: the filter text, or the rows it lets through as data arrived.
    void shownBlocksChanged(const std::optional<std::vector<int>>& blocks);

  private:
    void announceShownBlocks();

    QAbstractItemModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_;
    QLineEdit* filter_;
    QTableView* view_;
    bool syncing_ = false;
    std::optional<std::vector<int>> announced_;  // the last shownBlocksChanged
};

}  // namespace sp::ui
