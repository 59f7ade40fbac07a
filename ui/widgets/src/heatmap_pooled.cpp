#include "heatmap_pooled.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "sp/ui/colormap.h"

namespace sp::ui {

namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

bool sameSpan(const CellSpan& a, const CellSpan& b) {
    return a.first == b.first && a.last == b.last;
}

}  // namespace

void PooledSensitivity::clear() {
    valid_ = false;
}

void PooledSensitivity::sync(const TelemetryStore& store, std::uint64_t generation) {
    const std::size_t updates = store.updateCount();
    if (!valid_ || generation != generation_ || store.blockCount() != blocks_ || updates < columns_) {
        valid_ = true;
        generation_ = generation;
        blocks_ = store.blockCount();
        columns_ = first_ = std::min(store.firstKept(), updates);  // dropped updates are not held
        levels_.clear();
        presence_.clear();
        spans_.clear();
        maxima_.clear();
    }
    if (updates <= columns_) return;
    const auto blocks = std::size_t(blocks_);
    const std::size_t bits = presenceBytes();
    levels_.resize((updates - first_) * blocks);
    presence_.resize((updates - first_) * bits, 0);
    std::vector<FieldSeries> series(blocks);
    for (std::size_t b = 0; b < blocks; ++b) series[b] = store.series(int(b), BlockField::sensitivity);
    for (std::size_t u = columns_; u < updates; ++u) {
        std::uint8_t* level = levels_.data() + (u - first_) * blocks;
        std::uint8_t* present = presence_.data() + (u - first_) * bits;
        for (std::size_t b = 0; b < blocks; ++b) {
            const float v = u < series[b].size() ? series[b][u] : kMissing;
            // NaN and -inf are skipped by the reference's maximum: no value.
            if (!(v > kNone)) {
                level[b] = 0;
                continue;
            }
            level[b] = std::uint8_t(sensitivityIndex(v));
            present[b / 8] = std::uint8_t(present[b / 8] | (1u << (b % 8)));
        }
    }
    columns_ = updates;
    dropBefore(store.firstKept());
}

// O(held cells) once per retention chunk (a quarter of the retained updates): O(1) per update.
void PooledSensitivity::dropBefore(std::size_t update) {
    update = std::min(update, columns_);
    if (update <= first_) return;
    const std::size_t drop = update - first_;
    levels_.erase(levels_.begin(), levels_.begin() + std::ptrdiff_t(drop * std::size_t(blocks_)));
    presence_.erase(presence_.begin(), presence_.begin() + std::ptrdiff_t(drop * presenceBytes()));
    first_ = update;
}

void PooledSensitivity::computeColumn(const CellSpan& span, std::uint8_t* out) const {
    const auto blocks = std::size_t(blocks_);
    const std::size_t bits = presenceBytes();
    std::uint8_t* present = out + blocks;
    const long first = std::max(span.first, long(first_));  // dropped updates: no value
    if (first >= span.last) {
        std::memset(out, 0, blocks + bits);
        return;
    }
    const auto line_of = [&](long u) { return std::size_t(u) - first_; };
    std::memcpy(out, levels_.data() + line_of(first) * blocks, blocks);
    std::memcpy(present, presence_.data() + line_of(first) * bits, bits);
    // Element-wise over whole lines: the compiler vectorises both loops.
    for (long u = first + 1; u < span.last; ++u) {
        const std::uint8_t* line = levels_.data() + line_of(u) * blocks;
        for (std::size_t b = 0; b < blocks; ++b) out[b] = line[b] > out[b] ? line[b] : out[b];
        const std::uint8_t* has = presence_.data() + line_of(u) * bits;
        for (std::size_t i = 0; i < bits; ++i) present[i] = std::uint8_t(present[i] | has[i]);
    }
}

void PooledSensitivity::sampleInto(QImage& dst, double first_col, double px_per_col, std::size_t col_limit,
                                   const std::vector<int>& row_blocks, double first_row, double px_per_row,
                                   QRgb background) {
    const int w = dst.width();
    const int h = dst.height();
    if (w <= 0 || h <= 0) return;
    const long cols = long(std::min(col_limit, columns_));
    const std::size_t bytes = columnBytes();
    std::swap(spans_, old_spans_);
    std::swap(maxima_, old_maxima_);
    spans_.assign(std::size_t(w), CellSpan{});
    maxima_.resize(std::size_t(w) * bytes);
    std::vector<CellSpan> rows(static_cast<std::size_t>(h));
    for (int y = 0; y < h; ++y)
        rows[std::size_t(y)] = cellsOfPixel(first_row, px_per_row, y, long(row_blocks.size()));
    // `dst` still holds the last call's pixels for the same rows: a column whose span is unchanged
    // keeps its pixels and its maxima. At its x (an append at a fixed zoom moves the last column;
    // fitted to the width, the zoom moves once per pixel column's worth of updates), or `shift`
    // columns to the right when the view moved by whole pixel columns (following at k updates per
    // pixel): then every pixel row moves left first.
    const bool same_rows = dst.cacheKey() == dst_key_ && background == background_ &&
                           row_blocks == row_blocks_ && rows.size() == rows_.size() &&
                           std::equal(rows.begin(), rows.end(), rows_.begin(), sameSpan);
    for (int x = 0; x < w; ++x) spans_[std::size_t(x)] = cellsOfPixel(first_col, px_per_col, x, cols);
    auto kept = [this](std::size_t shift) {
        std::size_t n = 0;
        for (std::size_t x = 0; x + shift < old_spans_.size() && x < spans_.size(); ++x)
            n += sameSpan(old_spans_[x + shift], spans_[x]) && !spans_[x].empty() ? 1 : 0;
        return n;
    };
    std::size_t shift = 0;
    if (same_rows && !spans_.empty() && !spans_[0].empty()) {
        // Where the first column's span was: the candidate shift.
        for (std::size_t j = 1; j < old_spans_.size(); ++j) {
            if (sameSpan(old_spans_[j], spans_[0])) {
                if (kept(j) > kept(0)) shift = j;
                break;
            }
        }
    }
    if (shift > 0) {
        for (int y = 0; y < h; ++y) {
            auto* line = reinterpret_cast<QRgb*>(dst.scanLine(y));
            std::memmove(line, line + shift, (std::size_t(w) - shift) * sizeof(QRgb));
        }
    }
    std::vector<int> dirty;
    for (int x = 0; x < w; ++x) {
        const auto xi = std::size_t(x);
        const std::size_t from = xi + shift;
        const bool same = from < old_spans_.size() && sameSpan(old_spans_[from], spans_[xi]);
        if (same && !spans_[xi].empty())
            std::memcpy(maxima_.data() + xi * bytes, old_maxima_.data() + from * bytes, bytes);
        if (!same || !same_rows) dirty.push_back(x);
    }
    // Dirty columns in tiles: a tile's maxima are computed and at once turned into pixels while
    // they are in cache.
    constexpr std::size_t kTileW = 64;
    std::size_t j = 0;  // the old span list rises with x like the new one: one pass matches them
    std::size_t computed = 0;
    for (std::size_t t0 = 0; t0 < dirty.size(); t0 += kTileW) {
        const std::size_t t1 = std::min(dirty.size(), t0 + kTileW);
        for (std::size_t t = t0; t < t1; ++t) {
            const auto x = std::size_t(dirty[t]);
            const CellSpan s = spans_[x];
            if (s.empty() || blocks_ == 0) continue;
            std::uint8_t* out = maxima_.data() + x * bytes;
            if (x > 0 && sameSpan(s, spans_[x - 1])) {  // zoomed in: one cell, several columns
                std::memcpy(out, out - bytes, bytes);
                continue;
            }
            while (j < old_spans_.size() && (old_spans_[j].empty() || old_spans_[j].first < s.first ||
                                             (old_spans_[j].first == s.first && old_spans_[j].last < s.last)))
                ++j;
            if (j < old_spans_.size() && sameSpan(old_spans_[j], s)) {
                std::memcpy(out, old_maxima_.data() + j * bytes, bytes);  // moved by a scroll
            } else {
                computeColumn(s, out);
                ++computed;
            }
        }
        writeColumns(dst, dirty.data() + t0, dirty.data() + t1, rows, row_blocks, background);
    }
    last_computed_ = computed;
    last_written_ = dirty.size();
    dst_key_ = dst.cacheKey();
    background_ = background;
    rows_ = std::move(rows);
    row_blocks_ = row_blocks;
}

void PooledSensitivity::writeColumns(QImage& dst, const int* xs_begin, const int* xs_end,
                                     const std::vector<CellSpan>& rows, const std::vector<int>& row_blocks,
                                     QRgb background) const {
    const std::size_t bytes = columnBytes();
    const auto blocks = std::size_t(blocks_);
    // Colour by level, plus 256 when some cell had a value: level 0 is both entry 0 and "none".
    std::array<QRgb, 512> lut{};
    std::fill(lut.begin(), lut.begin() + 256, kMissingColor);
    std::copy(viridisTable().begin(), viridisTable().end(), lut.begin() + 256);
    const auto n = std::size_t(xs_end - xs_begin);
    std::array<const std::uint8_t*, 64> column{};  // nullptr: past the data
    for (std::size_t t = 0; t < n; ++t) {
        const auto x = std::size_t(xs_begin[t]);
        column[t] = spans_[x].empty() || blocks_ == 0 ? nullptr : maxima_.data() + x * bytes;
    }
    const int h = dst.height();
    for (int y = 0; y < h; ++y) {
        auto* out = reinterpret_cast<QRgb*>(dst.scanLine(y));
        const CellSpan r = rows[std::size_t(y)];
        if (y > 0 && sameSpan(r, rows[std::size_t(y) - 1])) {  // zoomed in: copies of the row above
            const auto* above = reinterpret_cast<const QRgb*>(dst.constScanLine(y - 1));
            for (std::size_t t = 0; t < n; ++t) out[xs_begin[t]] = above[xs_begin[t]];
            continue;
        }
        if (r.empty() || blocks_ == 0) {
            for (std::size_t t = 0; t < n; ++t) out[xs_begin[t]] = background;
            continue;
        }
        if (r.last - r.first == 1) {  // one block per pixel row: the common case
            const auto b = std::size_t(row_blocks[std::size_t(r.first)]);
            if (b >= blocks) {  // a block the store gained since the last sync: no value yet
                for (std::size_t t = 0; t < n; ++t) out[xs_begin[t]] = column[t] ? kMissingColor : background;
                continue;
            }
            const std::size_t byte = blocks + b / 8;
            const unsigned bit = unsigned(b % 8);
            for (std::size_t t = 0; t < n; ++t) {
                const std::uint8_t* m = column[t];
                out[xs_begin[t]] = m ? lut[m[b] | (((unsigned(m[byte]) >> bit) & 1u) << 8)] : background;
            }
            continue;
        }
        for (std::size_t t = 0; t < n; ++t) {
            const std::uint8_t* m = column[t];
            if (!m) {
                out[xs_begin[t]] = background;
                continue;
            }
            unsigned best = 0, present = 0;
            for (long i = r.first; i < r.last; ++i) {
                const auto b = std::size_t(row_blocks[std::size_t(i)]);
                if (b >= blocks) continue;
                best = std::max(best, unsigned(m[b]));
                present |= (unsigned(m[blocks + b / 8]) >> (b % 8)) & 1u;
            }
            out[xs_begin[t]] = lut[best | (present << 8)];
        }
    }
}

}  // namespace sp::ui
