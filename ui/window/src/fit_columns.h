#pragma once
// Table columns as wide as their text: a horizontal scroll bar rather than an ellipsis. Private to
// sp_ui_window (the block table and the event log use it).
class QTableView;

namespace sp::ui {

// Sizes every column of `view` to its contents and keeps it so. A header in ResizeToContents mode
// measures the rows laid out when it last resized, not rows that arrive or change later (a command's
// state, a longer message, a block's new reason): this measures again once per burst of model
// changes, and after a scroll, over the rows in view (Qt's resize precision). `view` must have its
// model; the fitting lives as long as the view.
void keepColumnsFitted(QTableView* view);

}  // namespace sp::ui
