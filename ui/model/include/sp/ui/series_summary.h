#pragma once
// A series' multi-resolution summary: the min, max and mean of every aligned power-of-two span of
// updates from kFirstSpan up, kept as the series grows (an append adds at most one entry per level,
// amortised O(1)). A zoomed-out drawing asks stats() for a pixel's updates and gets them from
// O(log n) entries plus at most 2 * kFirstSpan raw values at the ragged edges, not from every update;
// updates the store no longer keeps (a live run's retention, telemetry_store.h) are drawn from it
// alone. Memory: about 2 / kFirstSpan entries per value (16 bytes each): 0.125 bytes per value.
// Qt-free.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace sp::ui {

// Min, max and mean of the present (non-NaN) values of a span; NaN min/max/mean when none is.
struct SpanStats {
    float min = std::numeric_limits<float>::quiet_NaN();
    float max = std::numeric_limits<float>::quiet_NaN();
    double sum = 0.0;
    std::uint64_t count = 0;

    float mean() const { return count ? static_cast<float>(sum / double(count)) : min; }
    void add(float v) {
        if (std::isnan(v)) return;
        min = count && min <= v ? min : v;
        max = count && max >= v ? max : v;
        sum += double(v);
        ++count;
    }
    void merge(const SpanStats& o) {
        if (!o.count) return;
        min = count && min <= o.min ? min : o.min;
        max = count && max >= o.max ? max : o.max;
        sum += o.sum;
        count += o.count;
    }
};

class SeriesSummary {
  public:
    static constexpr std::size_t kFirstSpan = 256;  // the finest level's span (a power of two)

    void clear();
    void append(float v);  // NaN: missing, not counted
    // Room for `values` without regrowing a level (a replay sized from its file, like the columns).
    void reserve(std::size_t values);
    std::size_t size() const { return size_; }

    // Stats of values [first, last) (clamped to size()); `raw(u)` reads value u for the updates not
    // covered by whole entries, and returns NaN for one it no longer has (then only whole entries
    // count: a pixel of dropped updates still gets its spans' stats).
    template <class Raw>
    SpanStats stats(std::size_t first, std::size_t last, const Raw& raw) const;

    // The mean of the finest span holding update u (NaN when that span is not complete yet).
    float finestMean(std::size_t u) const {
        const std::size_t i = u / kFirstSpan;
        return levels_.empty() || i >= levels_[0].size() ? std::numeric_limits<float>::quiet_NaN()
                                                         : levels_[0][i].mean;
    }

    // Entries of level k cover updates [i * span, (i + 1) * span), span = kFirstSpan << k.
    int levelCount() const { return static_cast<int>(levels_.size()); }
    std::size_t memoryBytes() const;

  private:
    struct Entry {
        float min, max, mean, count;  // count as float: exact to 2^24 values per entry
    };
    static SpanStats statsOf(const Entry& e);
    static Entry entryOf(const SpanStats& s);

    std::vector<std::vector<Entry>> levels_;
    SpanStats pending_;  // the finest level's span being filled
    std::size_t size_ = 0;
};

template <class Raw>
SpanStats SeriesSummary::stats(std::size_t first, std::size_t last, const Raw& raw) const {
    SpanStats acc;
    last = last < size_ ? last : size_;
    std::size_t u = first;
    // The head up to the first whole span; then from the left the coarsest aligned entry that fits.
    while (u < last && u % kFirstSpan != 0) acc.add(raw(u++));
    while (u < last && !levels_.empty()) {
        int k = -1;
        for (int level = 0; level < levelCount(); ++level) {
            const std::size_t span = kFirstSpan << level;
            if (u % span != 0 || u + span > last || u / span >= levels_[std::size_t(level)].size()) break;
            k = level;
        }
        if (k < 0) break;
        acc.merge(statsOf(levels_[std::size_t(k)][u / (kFirstSpan << k)]));
        u += kFirstSpan << k;
    }
    while (u < last) acc.add(raw(u++));
    return acc;
}

}  // namespace sp::ui
