#pragma once
// The ranks of a data-parallel job side by side: a thin view over RankStatusModel (one row per
// rank), the cells behind a warning in amber. MainWindow shows it in a dock only while the current
// run is a job of more than one rank.
#include <QWidget>

class QIdentityProxyModel;
class QTableView;

namespace sp::ui {

class RankStatusModel;

class RankPanel : public QWidget {
    Q_OBJECT
  public:
    explicit RankPanel(QWidget* parent = nullptr);
    // Null shows nothing.
    void setModel(RankStatusModel* model);
    RankStatusModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    // The height that shows the header and every rank (up to kRowsShown, then it scrolls).
    int fittingHeight() const;
    static constexpr int kRowsShown = 8;

  private:
    QIdentityProxyModel* proxy_;
    QTableView* view_;
    RankStatusModel* model_ = nullptr;
};

}  // namespace sp::ui
