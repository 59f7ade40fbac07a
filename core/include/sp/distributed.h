#pragma once
// Data-parallel jobs (agent/PROTOCOL.md §11): what the ranks exchange, free of any transport. The
// agent moves these arrays through LibTorch's c10d collectives; tests and tools use them directly.
//
//  - Sharded statistics: each rank packs the moments of its slice of each block's gradients; every
//    rank all-gathers every rank's pack and merges them in rank order, so all ranks hold bit-identical
//    statistics, equal (within rounding) to one process reading the whole gradients.
//  - The map packet: rank 0's map for a step, with a checksum each rank checks the map it applies
//    against.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sp/stats.h"
#include "sp/telemetry.h"

namespace sp {

enum class StatsMode : std::uint8_t { replicated, sharded };
std::string_view to_string(StatsMode m);  // "replicated", "sharded"
bool parse_stats_mode(std::string_view text, StatsMode& out);

// ---- Sharded statistics ----
// Per block: numel, finite count, sum, sum of squares, M2 (the centred sum of squares), max |g| and
// the non-finite count, as doubles (counts are exact up to 2^53 elements).
inline constexpr std::size_t kShardFields = 7;

// The pack of one rank's statistics: block_count * kShardFields doubles; a block this rank has no
// gradients for packs as zeros. Throws std::invalid_argument for a block id outside [0, block_count).
std::vector<double> pack_shard_stats(const std::vector<BlockGradStats>& local, int block_count);

// Merges `ranks` packs laid end to end (rank 0 first) into per-block statistics, ascending by id,
// leaving out blocks no rank had gradients for. Counts and sums add, max |g| is the maximum, and
// the means and M2 merge with Chan's formula as the collector merges its own chunks. Throws
// std::invalid_argument when the size is not ranks * block_count * kShardFields.
std::vector<BlockGradStats> merge_shard_stats(const std::vector<double>& gathered, int ranks,
                                              int block_count);

// ---- The map packet ----
// FNV-1a (64-bit) over the precision codes, in block order: the same map gives the same checksum on
// every rank and every build.
std::uint64_t map_checksum(const std::vector<Precision>& map);

struct MapPacket {
    std::int64_t step = 0;
    std::uint64_t checksum = 0;  // of `precision`, computed by the sender
    std::vector<Precision> precision;
    std::vector<Reason> reason;  // why each block has its precision (the sender's update)
};

// As int64s: step, checksum (its bits), then one word per block (precision | reason << 8).
std::vector<std::int64_t> encode_map_packet(const MapPacket& packet);
std::size_t map_packet_words(int block_count);
// Throws std::invalid_argument for a wrong size or a code that is no precision or reason.
MapPacket decode_map_packet(const std::vector<std::int64_t>& words, int block_count);

// "blocks.2 int8 here, fp8_e4m3 on rank 0; ..." for the first few blocks where two maps differ
// (names: the layout's block names).
std::string describe_map_difference(const std::vector<Precision>& here, const std::vector<Precision>& there,
                                    const std::vector<std::string>& names, int there_rank);

}  // namespace sp
