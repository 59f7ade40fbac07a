#pragma once
// Internal to the update-record parser (update_record_parser.cpp): the keys it knows, in the
// writer's order (core/TELEMETRY.md "Update record"), with the struct member each one fills.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "sp/telemetry.h"

namespace sp::detail {

// One row per known key, in the writer's order. A member pointer handles the plain numeric
// fields; the rest are handled by index in a switch.
struct TopField {
    std::string_view key;
    double UpdateRecord::*dbl;
    int UpdateRecord::*num;
    std::optional<double> UpdateRecord::*opt = nullptr;  // optional additive numbers (null allowed)
};
enum TopIndex : std::size_t {
    kStepId,
    kBlockDetails = 9,
    kMode = 11,
    kMeasured,
    kTrainLoss,
    kEvalLoss,
    kType,
    kBudgetTarget = 17,
    kLossTolerance,
    kEstimatedLoss,
    kEvalStep
};
constexpr std::array<TopField, 21> kTop = {{
    {"step_id", nullptr, nullptr},
    {"timestamp", &UpdateRecord::timestamp, nullptr},
    {"blocks_bf16", nullptr, &UpdateRecord::blocks_bf16},
    {"blocks_int8", nullptr, &UpdateRecord::blocks_int8},
    {"mean_sensitivity", &UpdateRecord::mean_sensitivity, nullptr},
    {"max_sensitivity", &UpdateRecord::max_sensitivity, nullptr},
    {"min_sensitivity", &UpdateRecord::min_sensitivity, nullptr},
    {"precision_changes", nullptr, &UpdateRecord::precision_changes},
    {"estimated_bandwidth_saving_pct", &UpdateRecord::estimated_bandwidth_saving_pct, nullptr},
    {"block_details", nullptr, nullptr},
    {"blocks_fp8", nullptr, &UpdateRecord::blocks_fp8},
    {"mode", nullptr, nullptr},
    {"measured_bandwidth_saving_pct", nullptr, nullptr, &UpdateRecord::measured_bandwidth_saving_pct},
    {"train_loss", nullptr, nullptr, &UpdateRecord::train_loss},
    {"eval_loss", nullptr, nullptr, &UpdateRecord::eval_loss},
    {"type", nullptr, nullptr},
    {"blocks_int4", nullptr, &UpdateRecord::blocks_int4},
    {"budget_target_pct", nullptr, nullptr, &UpdateRecord::budget_target_pct},
    {"loss_tolerance_pct", nullptr, nullptr, &UpdateRecord::loss_tolerance_pct},
    {"estimated_loss_pct", nullptr, nullptr, &UpdateRecord::estimated_loss_pct},
    {"eval_step", nullptr, nullptr},
}};
constexpr std::uint32_t kTopRequired = (1u << 10) - 1;  // the seed's ten fields

struct DetailField {
    std::string_view key;
    double BlockDetail::*dbl;
    int BlockDetail::*num;
};
enum DetailIndex : std::size_t {
    kPrecision,
    kForced = 9,
    kChanged,
    kReason,
    kLastChangeStep = 13,
    kSnr = 15,
    kLossDelta,
    kReasonText
};
// In the writer's order, "mean" (additive) included: a line in that order matches each key at
// the row after the previous one (UpdateParser::row_of).
constexpr std::array<DetailField, 18> kDetail = {{
    {"precision", nullptr, nullptr},
    {"sensitivity", &BlockDetail::sensitivity, nullptr},
    {"grad_score", &BlockDetail::grad_score, nullptr},
    {"error_score", &BlockDetail::error_score, nullptr},
    {"relative_magnitude", &BlockDetail::relative_magnitude, nullptr},
    {"l2_norm", &BlockDetail::l2_norm, nullptr},
    {"max_abs", &BlockDetail::max_abs, nullptr},
    {"variance", &BlockDetail::variance, nullptr},
    {"mean", &BlockDetail::mean, nullptr},  // additive
    {"forced", nullptr, nullptr},
    {"changed", nullptr, nullptr},
    {"reason", nullptr, nullptr},  // additive from here on
    {"window", nullptr, &BlockDetail::window},
    {"last_change_step", nullptr, nullptr},
    {"switches", nullptr, &BlockDetail::switches},
    {"snr_db", nullptr, nullptr},
    {"loss_delta_pct", nullptr, nullptr},
    {"reason_text", nullptr, nullptr},
}};
// The seed's ten fields: all rows before "reason" but "mean".
constexpr std::uint32_t kDetailRequired = ((1u << kReason) - 1) & ~(1u << 8);

// A key's first 16 bytes, its closing quote included, as two little-endian words and the masks of
// the bytes they hold: UpdateParser::row_of compares most keys of a line in two word comparisons.
struct KeyHead {
    std::array<std::uint64_t, 2> word{};
    std::array<std::uint64_t, 2> mask{};
    std::size_t size = 0;  // the key's bytes and the quote
};
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "KeyHead's words are little-endian");

constexpr KeyHead key_head(std::string_view key) {
    KeyHead head{};
    head.size = key.size() + 1;
    for (std::size_t i = 0; i < 16 && i < head.size; ++i) {
        const std::uint64_t byte = i < key.size() ? std::uint8_t(key[i]) : std::uint8_t('"');
        head.word[i / 8] |= byte << (8 * (i % 8));
        head.mask[i / 8] |= std::uint64_t(0xFF) << (8 * (i % 8));
    }
    return head;
}

template <typename Field, std::size_t N>
constexpr std::array<KeyHead, N> key_heads(const std::array<Field, N>& table) {
    std::array<KeyHead, N> heads{};
    for (std::size_t i = 0; i < N; ++i) heads[i] = key_head(table[i].key);
    return heads;
}
constexpr std::array<KeyHead, kTop.size()> kTopHeads = key_heads(kTop);
constexpr std::array<KeyHead, kDetail.size()> kDetailHeads = key_heads(kDetail);

}  // namespace sp::detail
