#pragma once
// The byte-level text dataset: the whole file in memory, or one part of it (TextPart), the first
// 90% of those bytes for training and the last 10% held out. Batches are random windows; the offsets come
// from a caller-owned, seeded std::mt19937_64 so every run with the same seed sees the same batches.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "text_part.h"

namespace sp::trainer {

enum class Split { train, heldout };

struct Batch {
    at::Tensor tokens;   // int64 [batch, seq_len]: bytes at offsets o .. o+seq_len-1
    at::Tensor targets;  // int64 [batch, seq_len]: the next byte of each position
};

class TextData {
  public:
    // Reads the whole file and keeps `part` of it. Throws std::runtime_error when it cannot be read
    // or the part holds fewer than `min_bytes` bytes.
    TextData(const std::string& path, std::size_t min_bytes, TextPart part = TextPart::all);

    std::size_t size() const { return bytes_.size(); }
    std::size_t split_size(Split split) const;

    // `batch` windows of `seq_len` + 1 bytes at uniformly random offsets within `split`, on `device`.
    // The split must hold at least seq_len + 1 bytes.
    Batch sample(Split split, std::mt19937_64& generator, int batch, int seq_len,
                 const std::string& device) const;

  private:
    std::vector<std::uint8_t> bytes_;
    std::size_t train_end_ = 0;  // [0, train_end_) train, [train_end_, size) held out
};

}  // namespace sp::trainer
