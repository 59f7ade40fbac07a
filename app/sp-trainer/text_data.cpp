#include "text_data.h"

#include <ATen/ops/empty.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace sp::trainer {

TextData::TextData(const std::string& path, std::size_t min_bytes, TextPart part) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error("error reading '" + path + "'");
    const auto split_at = std::size_t(pretrain_end(bytes_.size()));
    if (part == TextPart::pretrain) bytes_.resize(split_at);
    if (part == TextPart::finetune) bytes_.erase(bytes_.begin(), bytes_.begin() + std::ptrdiff_t(split_at));
    const char* what = part == TextPart::all        ? ""
                       : part == TextPart::pretrain ? "'s pretrain part"
                                                    : "'s fine-tune part";
    if (bytes_.size() < min_bytes)
        throw std::runtime_error("'" + path + "'" + what + " holds " + std::to_string(bytes_.size()) +
                                 " bytes, at least " + std::to_string(min_bytes) + " are needed");
    // The held-out part is the end of the file: contiguous text the model never trains on.
    train_end_ = bytes_.size() - bytes_.size() / 10;
}

std::size_t TextData::split_size(Split split) const {
    return split == Split::train ? train_end_ : bytes_.size() - train_end_;
}

Batch TextData::sample(Split split, std::mt19937_64& generator, int batch, int seq_len,
                       const std::string& device) const {
    const std::size_t begin = split == Split::train ? 0 : train_end_;
    const std::size_t window = std::size_t(seq_len) + 1;
    if (split_size(split) < window) throw std::logic_error("text split shorter than one window");
    // Offsets in [begin, begin + size - window]: every window lies wholly inside its split.
    std::uniform_int_distribution<std::size_t> offset(begin, begin + split_size(split) - window);

    auto tokens = at::empty({batch, seq_len}, at::kLong);
    auto targets = at::empty({batch, seq_len}, at::kLong);
    auto* tok = tokens.data_ptr<std::int64_t>();
    auto* tgt = targets.data_ptr<std::int64_t>();
    for (int b = 0; b < batch; ++b) {
        const std::uint8_t* src = bytes_.data() + offset(generator);
        for (int t = 0; t < seq_len; ++t) {
            *tok++ = src[t];
            *tgt++ = src[t + 1];
        }
    }
    if (device != "cpu") return {tokens.to(at::Device(device)), targets.to(at::Device(device))};
    return {tokens, targets};
}

}  // namespace sp::trainer
