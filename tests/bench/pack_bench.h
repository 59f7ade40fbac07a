#pragma once
// What bench_quantize's packing rows and bench_pack_payload share: the fp32 masters packed (4096 x
// 1024 matrices, roughly normal with a few outliers, as many as make the megabytes asked for), and a
// timing of a pack against a memcpy of the same master bytes, taken turn about in the same process
// so that both see the same machine: the medians of each, and the pack's time per GB of masters.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace sp::bench {

inline constexpr std::size_t kPackRows = 4096;
inline constexpr std::size_t kPackCols = 1024;

// Roughly normal values with a few outliers (a scaled tangent of uniform draws).
inline std::vector<float> weights(std::size_t n, std::uint64_t seed) {
    std::vector<float> w(n);
    for (float& x : w) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const double u = double(seed >> 11) * 0x1p-53;
        x = float(std::tan(3.1 * (u - 0.5)) * 0.02);
    }
    return w;
}

// kPackRows x kPackCols matrices totalling `megabytes` MiB of fp32 (one at least).
inline std::vector<std::vector<float>> masters(std::size_t megabytes) {
    const std::size_t count =
        std::max<std::size_t>(1, (megabytes << 20) / (kPackRows * kPackCols * sizeof(float)));
    std::vector<std::vector<float>> out;
    for (std::size_t k = 0; k < count; ++k) out.push_back(weights(kPackRows * kPackCols, 42 + k));
    return out;
}

inline std::size_t master_bytes(const std::vector<std::vector<float>>& m) {
    return m.size() * kPackRows * kPackCols * sizeof(float);
}

struct PackTiming {
    double pack_s = 0;    // median, all masters
    double memcpy_s = 0;  // median, the same bytes
    double ratio() const { return pack_s / memcpy_s; }
};

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// `runs` turns (after one warm-up) of pack() and of a memcpy of every master into `copies`.
template <typename Pack>
PackTiming time_against_memcpy(const std::vector<std::vector<float>>& m,
                               std::vector<std::vector<float>>& copies, int runs, Pack pack) {
    using Clock = std::chrono::steady_clock;
    std::vector<double> pack_s, memcpy_s;
    for (int r = -1; r < runs; ++r) {
        auto t0 = Clock::now();
        for (std::size_t k = 0; k < m.size(); ++k)
            std::memcpy(copies[k].data(), m[k].data(), m[k].size() * sizeof(float));
        auto t1 = Clock::now();
        pack();
        auto t2 = Clock::now();
        if (r < 0) continue;
        memcpy_s.push_back(std::chrono::duration<double>(t1 - t0).count());
        pack_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    return {median(pack_s), median(memcpy_s)};
}

// One row: the pack's median per GB of masters, the memcpy's, and the ratio.
inline void print_pack_row(const char* format, const char* how, const PackTiming& t, std::size_t bytes) {
    const double gb = double(bytes) * 1e-9;
    std::printf("  %-9s %-28s %7.1f ms/GB  (memcpy %5.1f ms/GB)  x%5.2f memcpy\n", format, how,
                t.pack_s / gb * 1e3, t.memcpy_s / gb * 1e3, t.ratio());
}

}  // namespace sp::bench
