#include "sp/budget.h"

#include "descending_buckets.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

namespace sp {
namespace {

// Byte levels a block can stand at: INT4 (0.5 B/element), the 8-bit formats (1) and BF16 (2).
constexpr int kLevelCount = 3;

constexpr int level_of(Precision p) {
    const double b = bytes_per_element(p);
    return b == 0.5 ? 0 : b == 1.0 ? 1 : kLevelCount - 1;
}

// The low formats at each of the two lower levels, in kLowFormatsCheapestFirst's order.
struct LevelFormats {
    std::array<Precision, kLowFormatsCheapestFirst.size()> formats{};
    std::size_t count = 0;
};
constexpr std::array<LevelFormats, kLevelCount - 1> kFormatsAtLevel = [] {
    std::array<LevelFormats, kLevelCount - 1> at{};
    for (Precision p : kLowFormatsCheapestFirst) {
        LevelFormats& l = at[std::size_t(level_of(p))];
        l.formats[l.count++] = p;
    }
    return at;
}();

// The format a block takes at a byte level: among its admissible formats of that width, the one with
// the highest SNR (ties: INT8, then FP8 E4M3, then E5M2). None: nullopt.
std::optional<Precision> format_at(const BudgetBlock& b, int level) {
    if (level == kLevelCount - 1) return Precision::bf16;
    std::optional<Precision> best;
    double best_snr = 0;
    const LevelFormats& candidates = kFormatsAtLevel[std::size_t(level)];
    for (std::size_t i = 0; i < candidates.count; ++i) {
        const Precision p = candidates.formats[i];
        if (!has_format(b.admissible, p)) continue;
        const double snr =
            std::isfinite(b.snr_db[std::size_t(p)]) ? b.snr_db[std::size_t(p)] : nominal_snr_db(p);
        if (!best || snr > best_snr) {
            best = p;
            best_snr = snr;
        }
    }
    return best;
}

using Move = detail::BudgetMove;

// 10^(-snr/10) at each format's nominal SNR, raised once: most blocks have no estimate for BF16.
const PerFormat& nominal_noise_share() {
    static const PerFormat share = [] {
        PerFormat s{};
        for (std::size_t p = 0; p < kPrecisionCount; ++p)
            s[p] = std::pow(10.0, -nominal_snr_db(Precision(p)) / 10.0);
        return s;
    }();
    return share;
}

// A format's relative noise power in a block: from its estimated SNR, or the nominal one.
double noise_share(const BudgetBlock& b, Precision p) {
    const double snr = b.snr_db[std::size_t(p)];
    return std::isfinite(snr) ? std::pow(10.0, -snr / 10.0) : nominal_noise_share()[std::size_t(p)];
}

// Equal bit for bit: NaN to the same NaN, -0 not to +0 (what the remembered values depend on).
bool same_bits(double x, double y) {
    std::uint64_t bx = 0, by = 0;
    std::memcpy(&bx, &x, sizeof bx);
    std::memcpy(&by, &y, sizeof by);
    return bx == by;
}

bool same_bits(const PerFormat& x, const PerFormat& y) {
    for (std::size_t p = 0; p < x.size(); ++p)
        if (!same_bits(x[p], y[p])) return false;
    return true;
}

}  // namespace

double nominal_snr_db(Precision p) {
    switch (p) {
        // Floats with m mantissa bits, values uniform within a binade: 10 log10(28) + 6.02 m.
        case Precision::bf16:
            return 56.6;
        case Precision::fp8_e4m3:
            return 32.5;
        case Precision::fp8_e5m2:
            return 26.5;
        // Integers, Gaussian values, step 2 absmax / (2^b - 2): INT8 rows (absmax ~3 sigma), INT4 groups of
        // 64 (absmax ~2.4 sigma): 10 log10(12 sigma^2 / step^2).
        case Precision::int8:
            return 43.3;
        case Precision::int4:
            return 20.1;
    }
    return 0.0;
}

double sensitivity_in(const BudgetBlock& b, Precision p) {
    return b.sensitivity * noise_share(b, p);
}

// The block's levels: remembered, or worked out again when its SNRs, formats or size changed.
const BudgetPlanner::Shape& BudgetPlanner::shape_of(const BudgetBlock& b, std::size_t block) {
    Shape& shape = shapes_[block];
    if (shape.known && same_bits(shape.snr_db, b.snr_db) && shape.admissible == b.admissible &&
        same_bits(shape.bytes_bf16, b.bytes_bf16))
        return shape;
    shape.known = true;
    shape.snr_db = b.snr_db;
    shape.admissible = b.admissible;
    shape.bytes_bf16 = b.bytes_bf16;
    shape.format.fill(detail::kNoBudgetFormat);
    shape.bytes.fill(0.0);
    shape.noise_share.fill(0.0);
    for (int l = 0; l < kLevelCount; ++l) {
        const std::optional<Precision> format = format_at(b, l);
        if (!format) continue;
        shape.format[std::size_t(l)] = std::uint8_t(*format);
        shape.bytes[std::size_t(l)] = b.bytes_bf16 * bytes_per_element(*format) / 2.0;
        shape.noise_share[std::size_t(l)] = noise_share(b, *format);
    }
    std::uint8_t up = kLevelCount;  // BF16, the last level, always has a format
    shape.next[kLevelCount] = kLevelCount;
    shape.extra[kLevelCount] = 0.0;
    for (int l = kLevelCount - 1; l >= 0; --l) {
        shape.next[std::size_t(l)] = up;
        shape.extra[std::size_t(l)] = shape.bytes[up] - shape.bytes[std::size_t(l)];
        if (shape.format[std::size_t(l)] != detail::kNoBudgetFormat) {
            shape.start = std::uint8_t(l);
            up = std::uint8_t(l);
        }
    }
    return shape;
}

// Puts a free block at its cheapest level and lists its moves up (at most two, one level each) in its
// two slots. Returns the bytes it stands at. The moves are listed block by block, first move first; see
// order_moves for the order they are then sorted into. Which moves a block has, and whether a move
// returns it to where it stands, are as unpredictable as its SNRs: both moves are worked out and
// written, and only the count of listed moves depends on them.
double BudgetPlanner::start_block(const BudgetBlock& b, std::size_t block, double hysteresis) {
    const Shape& shape = shape_of(b, block);
    const std::uint8_t start = shape.start;
    const std::uint8_t first = shape.next[start];
    const std::uint8_t second = shape.next[first];
    shapes_[block].level = start;
    const int current = level_of(b.current);
    const std::array<double, 2> weight = {1.0, 1.0 + hysteresis};  // back to where it stands: weighed up
    // Sensitivity removed per extra byte by the move from `from` to `to` = next[from].
    auto gain = [&](std::uint8_t from, std::uint8_t to) {
        const double removed =
            b.sensitivity * shape.noise_share[from] - b.sensitivity * shape.noise_share[to];
        return removed / std::max(shape.extra[from], 1e-300) * weight[to == current];
    };
    const double first_gain = gain(start, first);
    const bool has_first = first < kLevelCount;
    const bool has_second = second < kLevelCount;  // implies has_first
    auto list = [&](std::uint8_t from, std::uint8_t to, double g, bool listed) {
        // Field by field in place: a Move built on the stack and copied stalled on store forwarding.
        Move& m = moves_[move_count_];
        m.gain = g;  // -0 sorts as +0 (detail::descending_key)
        m.block = int(block);
        m.from_level = from;
        m.to_level = to;
        move_count_ += listed ? 1 : 0;
        const double cost = listed ? shape.extra[from] : std::numeric_limits<double>::infinity();
        smallest_move_ = std::min(smallest_move_, cost);
    };
    list(start, first, first_gain, has_first);
    list(first, second, std::min(gain(first, second), first_gain), has_second);
    return shape.bytes[start];
}

// Every move the greedy could make, in the order a max-heap on gain (ties: lower block first) pops
// them. A block's second move enters that heap only when its first is popped, so it comes after its
// first: at its own gain when that is lower, else right after the first (every move still in the heap
// then has a lower gain, or the same gain and a higher block). Keyed by min(second, first) gain and
// listed block by block, first move first, a stable order by gain is exactly that order: the
// buckets give it, sorting each only when the scan reaches it.
void BudgetPlanner::order_moves() {
    detail::assign_buckets(order_, moves_, move_count_, [](const Move& m) { return m.gain; });
}

BudgetPlan BudgetPlanner::plan(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis) {
    const std::size_t n = blocks.size();
    shapes_.resize(n);
    moves_.resize(2 * n);
    move_count_ = 0;
    smallest_move_ = std::numeric_limits<double>::infinity();
    BudgetPlan plan;
    plan.precision.assign(n, Precision::bf16);
    double total_bf16 = 0, bytes = 0;
    for (std::size_t b = 0; b < n; ++b) {
        total_bf16 += blocks[b].bytes_bf16;
        if (blocks[b].fixed) {
            plan.precision[b] = *blocks[b].fixed;
            bytes += blocks[b].bytes_bf16 * bytes_per_element(*blocks[b].fixed) / 2.0;
        } else {
            bytes += start_block(blocks[b], b, hysteresis);
            plan.precision[b] = Precision(shapes_[b].format[shapes_[b].level]);
        }
    }
    auto saving_pct = [&](double b) { return total_bf16 > 0 ? 100.0 * (1.0 - b / total_bf16) : 0.0; };

    // Once not even the smallest move up of any block fits, every move left would be dropped: stop. The
    // margin (1e-12 of the total) covers the rounding of `bytes - from + to`, so the plan is the one the
    // full loop would make, bit for bit.
    auto nothing_fits = [&] {
        return total_bf16 > 0 && std::isfinite(smallest_move_) &&
               saving_pct(bytes + smallest_move_ - 1e-12 * total_bf16) < target_pct;
    };

    // Moves by gain, largest first. A move that would break the target is dropped (the block stays, and
    // its next move with it); cheaper moves after it may still fit.
    order_moves();
    detail::visit_descending(order_, [&](std::uint32_t index) {
        if (nothing_fits()) return false;
        const Move& m = moves_[index];
        Shape& at = shapes_[std::size_t(m.block)];
        if (at.level != m.from_level) return true;  // its first move was dropped
        const double after = bytes - at.bytes[std::size_t(m.from_level)] + at.bytes[std::size_t(m.to_level)];
        if (saving_pct(after) < target_pct) return true;
        bytes = after;
        plan.precision[std::size_t(m.block)] = Precision(at.format[std::size_t(m.to_level)]);
        at.level = m.to_level;
        ++plan.moves_up;
        return true;
    });
    plan.saving_pct = saving_pct(bytes);
    return plan;
}

BudgetPlan plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis) {
    return BudgetPlanner().plan(blocks, target_pct, hysteresis);
}

}  // namespace sp
