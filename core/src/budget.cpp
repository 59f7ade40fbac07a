#include "sp/budget.h"

#include "radix_sort.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

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

using LevelChoice = detail::BudgetLevel;
using BlockLevels = detail::BudgetLevels;
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

double noise_share(double snr_db) {
    return std::pow(10.0, -snr_db / 10.0);
}

// The gain of a free block's move up from `from`: sensitivity removed per extra byte (hysteresis
// weighted), and the level it goes to. None at BF16.
std::optional<std::pair<double, int>> move_gain(const BlockLevels& levels, int from, int current_level,
                                                double hysteresis) {
    for (int l = from + 1; l < kLevelCount; ++l) {
        const LevelChoice& to = levels[std::size_t(l)];
        if (!to.format) continue;
        const LevelChoice& at = levels[std::size_t(from)];
        const double extra = to.bytes - at.bytes;
        double gain = (at.kept - to.kept) / std::max(extra, 1e-300);
        if (l == current_level) gain *= 1.0 + hysteresis;  // back to where it stands
        return std::make_pair(gain, l);
    }
    return std::nullopt;
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
    const double snr = b.snr_db[std::size_t(p)];
    return b.sensitivity * (std::isfinite(snr) ? noise_share(snr) : nominal_noise_share()[std::size_t(p)]);
}

double BudgetPlanner::kept_sensitivity(const BudgetBlock& b, std::size_t block, Precision p) {
    const double snr = b.snr_db[std::size_t(p)];
    if (!std::isfinite(snr)) return b.sensitivity * nominal_noise_share()[std::size_t(p)];
    double& seen = snr_seen_[block][std::size_t(p)];
    double& share = noise_share_[block][std::size_t(p)];
    if (!(seen == snr)) {
        seen = snr;
        share = noise_share(snr);
    }
    return b.sensitivity * share;
}

// A free block's format, bytes and kept sensitivity at each level.
BlockLevels BudgetPlanner::levels_of(const BudgetBlock& b, std::size_t block) {
    BlockLevels levels;
    for (int l = 0; l < kLevelCount; ++l) {
        LevelChoice& c = levels[std::size_t(l)];
        c.format = format_at(b, l);
        if (!c.format) continue;
        c.bytes = b.bytes_bf16 * bytes_per_element(*c.format) / 2.0;
        c.kept = kept_sensitivity(b, block, *c.format);
    }
    return levels;
}

// Puts a free block at its cheapest level and lists its moves up (at most two, one level each).
// Returns the bytes it stands at. The moves are listed block by block, first move first; see
// order_moves for the order they are then sorted into.
double BudgetPlanner::start_block(const BudgetBlock& b, std::size_t block, double hysteresis) {
    const BlockLevels levels = levels_of(b, block);
    Standing& at = standing_[block];
    for (std::size_t l = 0; l < levels.size(); ++l) {
        at.bytes[l] = levels[l].bytes;
        at.format[l] = levels[l].format ? std::uint8_t(*levels[l].format) : kNoFormat;
    }
    int start = 0;
    while (!levels[std::size_t(start)].format) ++start;  // BF16, the last level, always has one
    at.level = std::uint8_t(start);
    const int current = level_of(b.current);
    auto add = [&](int from, int to, double gain) {
        moves_.push_back({gain == 0.0 ? 0.0 : gain, int(block), std::uint8_t(from), std::uint8_t(to)});
        smallest_move_ = std::min(smallest_move_, at.bytes[std::size_t(to)] - at.bytes[std::size_t(from)]);
    };
    if (const auto first = move_gain(levels, start, current, hysteresis)) {
        add(start, first->second, first->first);
        if (const auto second = move_gain(levels, first->second, current, hysteresis))
            add(first->second, second->second, std::min(second->first, first->first));
    }
    return at.bytes[std::size_t(start)];
}

// Every move the greedy could make, in the order a max-heap on gain (ties: lower block first) pops
// them. A block's second move enters that heap only when its first is popped, so it comes after its
// first: at its own gain when that is lower, else right after the first (every move still in the heap
// then has a lower gain, or the same gain and a higher block). Keyed by min(second, first) gain and
// listed block by block, first move first, a stable sort gives exactly that order.
void BudgetPlanner::order_moves() {
    detail::stable_sort_descending(moves_, scratch_, [](const Move& m) { return m.gain; });
}

BudgetPlan BudgetPlanner::plan(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis) {
    const std::size_t n = blocks.size();
    if (snr_seen_.size() != n) {
        PerFormat none{};
        none.fill(std::numeric_limits<double>::quiet_NaN());
        snr_seen_.assign(n, none);
        noise_share_.assign(n, none);
    }
    standing_.resize(n);
    moves_.clear();
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
            plan.precision[b] = Precision(standing_[b].format[std::size_t(standing_[b].level)]);
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
    for (const Move& m : moves_) {
        if (nothing_fits()) break;
        Standing& at = standing_[std::size_t(m.block)];
        if (at.level != m.from_level) continue;  // its first move was dropped
        const double after = bytes - at.bytes[std::size_t(m.from_level)] + at.bytes[std::size_t(m.to_level)];
        if (saving_pct(after) < target_pct) continue;
        bytes = after;
        plan.precision[std::size_t(m.block)] = Precision(at.format[std::size_t(m.to_level)]);
        at.level = m.to_level;
        ++plan.moves_up;
    }
    plan.saving_pct = saving_pct(bytes);
    return plan;
}

BudgetPlan plan_budget(const std::vector<BudgetBlock>& blocks, double target_pct, double hysteresis) {
    return BudgetPlanner().plan(blocks, target_pct, hysteresis);
}

}  // namespace sp
