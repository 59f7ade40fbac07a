#include "sp/ui/series_summary.h"

namespace sp::ui {

void SeriesSummary::clear() {
    std::vector<std::vector<Entry>>().swap(levels_);
    pending_ = {};
    size_ = 0;
}

void SeriesSummary::reserve(std::size_t values) {
    std::size_t entries = values / kFirstSpan;
    for (std::size_t level = 0; entries > 0; ++level, entries /= 2) {
        if (levels_.size() <= level) levels_.emplace_back();
        levels_[level].reserve(entries);
    }
}

SpanStats SeriesSummary::statsOf(const Entry& e) {
    SpanStats s;
    if (e.count <= 0.0f) return s;
    s.min = e.min;
    s.max = e.max;
    s.count = static_cast<std::uint64_t>(e.count);
    s.sum = double(e.mean) * double(e.count);
    return s;
}

SeriesSummary::Entry SeriesSummary::entryOf(const SpanStats& s) {
    return Entry{s.min, s.max, s.mean(), static_cast<float>(s.count)};
}

void SeriesSummary::append(float v) {
    pending_.add(v);
    ++size_;
    if (size_ % kFirstSpan != 0) return;
    // A finest span completed: enter it, and carry pairs up like a binary counter.
    SpanStats carry = pending_;
    pending_ = {};
    for (std::size_t level = 0;; ++level) {
        if (levels_.size() <= level) levels_.emplace_back();
        std::vector<Entry>& entries = levels_[level];
        entries.push_back(entryOf(carry));
        if (entries.size() % 2 != 0) break;
        SpanStats pair = statsOf(entries[entries.size() - 2]);
        pair.merge(statsOf(entries.back()));
        carry = pair;
    }
}

std::size_t SeriesSummary::memoryBytes() const {
    std::size_t bytes = levels_.capacity() * sizeof(std::vector<Entry>);
    for (const auto& level : levels_) bytes += level.capacity() * sizeof(Entry);
    return bytes;
}

}  // namespace sp::ui
