#pragma once
// Which bytes of the text file a run reads (sp-trainer --text-part): all of them, or, for a
// pretrain-then-fine-tune experiment on one file, the first kPretrainFraction of the bytes
// (`pretrain`) or the rest (`finetune`). Each part keeps its own held-out tail (text_data.h), so a
// fine-tune is evaluated on text it neither pretrained nor fine-tuned on.
#include <cstdint>
#include <string_view>

namespace sp::trainer {

enum class TextPart : std::uint8_t { all, pretrain, finetune };
constexpr double kPretrainFraction = 0.6;

// Where the pretrain part of a `total`-byte file ends (the fine-tune part starts).
constexpr std::uint64_t pretrain_end(std::uint64_t total) {
    return std::uint64_t(double(total) * kPretrainFraction);
}
// The bytes `part` keeps of a `total`-byte file.
constexpr std::uint64_t part_size(TextPart part, std::uint64_t total) {
    return part == TextPart::all        ? total
           : part == TextPart::pretrain ? pretrain_end(total)
                                        : total - pretrain_end(total);
}

constexpr std::string_view to_string(TextPart p) {
    return p == TextPart::all ? "all" : p == TextPart::pretrain ? "pretrain" : "finetune";
}

}  // namespace sp::trainer
