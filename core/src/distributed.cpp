#include "sp/distributed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace sp {
namespace {

enum Field : std::size_t { kNumel, kFinite, kSum, kSumSq, kM2, kMaxAbs, kNonfinite };

// Chan's merge of (count, mean, M2) pairs: the collector's own chunk merge, so a sharded job's
// statistics are what one process reading every slice would have computed.
struct Moments {
    double finite = 0, mean = 0, m2 = 0;
    void merge(double n_b, double mean_b, double m2_b) {
        if (n_b <= 0) return;
        if (finite <= 0) {
            finite = n_b;
            mean = mean_b;
            m2 = m2_b;
            return;
        }
        const double n = finite + n_b;
        const double delta = mean_b - mean;
        mean += delta * (n_b / n);
        m2 += m2_b + delta * delta * (finite * n_b / n);
        finite = n;
    }
};

constexpr unsigned kReasonShift = 8;
constexpr std::int64_t kCodeMask = 0xff;

}  // namespace

std::string_view to_string(StatsMode m) {
    return m == StatsMode::sharded ? "sharded" : "replicated";
}

bool parse_stats_mode(std::string_view text, StatsMode& out) {
    if (text == "replicated")
        out = StatsMode::replicated;
    else if (text == "sharded")
        out = StatsMode::sharded;
    else
        return false;
    return true;
}

std::vector<double> pack_shard_stats(const std::vector<BlockGradStats>& local, int block_count) {
    std::vector<double> pack(std::size_t(block_count) * kShardFields, 0.0);
    for (const BlockGradStats& s : local) {
        if (s.block_id < 0 || s.block_id >= block_count)
            throw std::invalid_argument("pack_shard_stats: block " + std::to_string(s.block_id) +
                                        " outside the layout of " + std::to_string(block_count));
        double* f = pack.data() + std::size_t(s.block_id) * kShardFields;
        const double finite = double(s.numel - std::min(s.numel, s.nonfinite_count));
        f[kNumel] = double(s.numel);
        f[kFinite] = finite;
        f[kSum] = s.mean * finite;
        f[kSumSq] = s.l2_norm * s.l2_norm;
        f[kM2] = s.variance * finite;
        f[kMaxAbs] = s.max_abs;
        f[kNonfinite] = double(s.nonfinite_count);
    }
    return pack;
}

std::vector<BlockGradStats> merge_shard_stats(const std::vector<double>& gathered, int ranks,
                                              int block_count) {
    const std::size_t per_rank = std::size_t(block_count) * kShardFields;
    if (ranks <= 0 || block_count < 0 || gathered.size() != std::size_t(ranks) * per_rank)
        throw std::invalid_argument("merge_shard_stats: " + std::to_string(gathered.size()) + " values for " +
                                    std::to_string(ranks) + " ranks of " + std::to_string(block_count) +
                                    " blocks");
    std::vector<BlockGradStats> out;
    out.reserve(std::size_t(block_count));
    for (int b = 0; b < block_count; ++b) {
        double numel = 0, sumsq = 0, max_abs = 0, nonfinite = 0;
        Moments m;
        for (int r = 0; r < ranks; ++r) {
            const double* f = gathered.data() + std::size_t(r) * per_rank + std::size_t(b) * kShardFields;
            numel += f[kNumel];
            sumsq += f[kSumSq];
            max_abs = std::max(max_abs, f[kMaxAbs]);
            nonfinite += f[kNonfinite];
            m.merge(f[kFinite], f[kFinite] > 0 ? f[kSum] / f[kFinite] : 0.0, f[kM2]);
        }
        if (numel <= 0) continue;  // no rank had gradients for it: as a collector leaves it out
        BlockGradStats s;
        s.block_id = b;
        s.numel = std::uint64_t(numel);
        s.nonfinite_count = std::uint64_t(nonfinite);
        s.l2_norm = std::sqrt(sumsq);
        s.max_abs = max_abs;
        s.mean = m.mean;
        s.variance = m.finite > 0 ? m.m2 / m.finite : 0.0;
        out.push_back(s);
    }
    return out;
}

std::uint64_t map_checksum(const std::vector<Precision>& map) {
    std::uint64_t h = 14695981039346656037ULL;
    for (Precision p : map) {
        h ^= std::uint64_t(p);
        h *= 1099511628211ULL;
    }
    return h;
}

std::size_t map_packet_words(int block_count) {
    return 2 + std::size_t(std::max(block_count, 0));
}

std::vector<std::int64_t> encode_map_packet(const MapPacket& packet) {
    if (packet.reason.size() != packet.precision.size())
        throw std::invalid_argument("encode_map_packet: one reason per block");
    std::vector<std::int64_t> words;
    words.reserve(map_packet_words(int(packet.precision.size())));
    words.push_back(packet.step);
    std::int64_t checksum = 0;
    std::memcpy(&checksum, &packet.checksum, sizeof checksum);
    words.push_back(checksum);
    for (std::size_t b = 0; b < packet.precision.size(); ++b)
        words.push_back(std::int64_t(packet.precision[b]) | std::int64_t(packet.reason[b]) << kReasonShift);
    return words;
}

MapPacket decode_map_packet(const std::vector<std::int64_t>& words, int block_count) {
    if (words.size() != map_packet_words(block_count))
        throw std::invalid_argument("map packet: " + std::to_string(words.size()) + " words for " +
                                    std::to_string(block_count) + " blocks");
    MapPacket p;
    p.step = words[0];
    std::memcpy(&p.checksum, &words[1], sizeof p.checksum);
    for (std::size_t i = 2; i < words.size(); ++i) {
        const std::int64_t precision = words[i] & kCodeMask, reason = words[i] >> kReasonShift;
        if (precision >= std::int64_t(kPrecisionCount) || reason < 0 ||
            reason > std::int64_t(Reason::rollback))
            throw std::invalid_argument("map packet: block " + std::to_string(i - 2) + " has code " +
                                        std::to_string(words[i]) + ", no precision and reason");
        p.precision.push_back(Precision(precision));
        p.reason.push_back(Reason(reason));
    }
    return p;
}

std::string describe_map_difference(const std::vector<Precision>& here, const std::vector<Precision>& there,
                                    const std::vector<std::string>& names, int there_rank) {
    if (here.size() != there.size())
        return std::to_string(here.size()) + " blocks here, " + std::to_string(there.size()) + " on rank " +
               std::to_string(there_rank);
    constexpr int kShown = 4;
    std::string out;
    int differing = 0;
    for (std::size_t b = 0; b < here.size(); ++b) {
        if (here[b] == there[b]) continue;
        if (differing++ >= kShown) continue;
        const std::string name = b < names.size() ? names[b] : "block " + std::to_string(b);
        out += (out.empty() ? "" : "; ") + name + " " + std::string(to_string(here[b])) + " here, " +
               std::string(to_string(there[b])) + " on rank " + std::to_string(there_rank);
    }
    if (differing > kShown) out += "; and " + std::to_string(differing - kShown) + " more";
    return out;
}

}  // namespace sp
