#pragma once
// Appends decimated points to a DecimatedSeries, starting a new segment when a gap came since the
// previous point: shared by decimate() and the store-backed chart series.
#include "sp/ui/decimate.h"

namespace sp::ui::detail {

class SegmentWriter {
  public:
    explicit SegmentWriter(DecimatedSeries& out) : out_(out) {}
    void point(double x, float y) {
        if (out_.points.isEmpty() || gap_) out_.segment_starts.push_back(out_.points.size());
        gap_ = false;
        out_.points.append(QPointF(x, double(y)));
    }
    void gap() { gap_ = true; }

  private:
    DecimatedSeries& out_;
    bool gap_ = false;
};

}  // namespace sp::ui::detail
