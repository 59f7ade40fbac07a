// Full mode's packing (issue 46): after each optimizer step every weight's fp32 master is packed into
// its format on the host, by sp::agent::detail::pack_payload (sp::pack_rows over ATen's intra-op
// threads). Here on 4096 x 1024 masters, at one intra-op thread and at the hardware's thread count,
// each timed turn about with a memcpy of the same bytes in the same process (pack_bench.h): ms per GB
// of masters, median of several runs, ratio = pack / memcpy (the aim: <= 3). bench_quantize has
// pack_rows alone and the scalar reference pack_payload ran before.
// Usage: bench_pack_payload [megabytes]   (of masters; default 64)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "pack_bench.h"
#include "payload.h"
#include "sp/precision.h"

namespace {

constexpr int kRuns = 7;

}  // namespace

int main(int argc, char** argv) {
    using sp::bench::kPackCols;
    using sp::bench::kPackRows;
    std::vector<std::vector<float>> m = sp::bench::masters(argc > 1 ? std::size_t(std::atol(argv[1])) : 64);
    std::vector<std::vector<float>> copies(m.size(), std::vector<float>(kPackRows * kPackCols));
    std::vector<at::Tensor> masters;
    masters.reserve(m.size());
    for (std::vector<float>& w : m)
        masters.push_back(
            at::from_blob(w.data(), {std::int64_t(kPackRows), std::int64_t(kPackCols)}, at::kFloat));
    const std::size_t bytes = sp::bench::master_bytes(m);
    std::vector<int> threads = {1};
    if (const int hardware = int(std::thread::hardware_concurrency()); hardware > 1)
        threads.push_back(hardware);
    std::printf("pack_payload of %zu masters of %zu x %zu fp32 (%.0f MB), median of %d (x = time / memcpy)\n",
                m.size(), kPackRows, kPackCols, double(bytes) * 1e-6, kRuns);
    for (sp::Precision p : sp::kAllPrecisions)
        for (const int t : threads) {
            at::set_num_threads(t);
            std::vector<sp::agent::detail::Payload> out(m.size());
            const sp::bench::PackTiming timing = sp::bench::time_against_memcpy(m, copies, kRuns, [&] {
                for (std::size_t k = 0; k < m.size(); ++k)
                    out[k] = sp::agent::detail::pack_payload(masters[k], p);
            });
            const std::string how = "pack_payload, " + std::to_string(t) + (t == 1 ? " thread" : " threads");
            sp::bench::print_pack_row(sp::to_string(p).data(), how.c_str(), timing, bytes);
        }
    return 0;
}
