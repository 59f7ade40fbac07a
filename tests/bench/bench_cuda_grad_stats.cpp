// CUDA gradient statistics: the fused pass (make_cuda_grad_stats_collector) against what the same
// gradients cost otherwise, on the gradients of 48 transformer blocks of a ~1B- and a ~7.5B-parameter
// bf16 model (per block: qkv 3d x d, out d x d, gate and up f x d, down d x f, two norms d;
// 1B: d 1280, f 3456 -> 0.95B; 7B: d 3584, f 9728 -> 7.5B). The gradients are views of one flat
// buffer, as fused gradient buffers are. Rows, GPU time between CUDA events, median of N runs after
// warm-up, all on the current stream:
//   copy        one cudaMemcpyAsync device -> device of the same bytes (reads and writes them)
//   collector   collect(): every statistic of every block (results() is read after the timing)
//   foreach     at::_foreach_norm over the gradients + per tensor abs().max() and var()
//   naive       per tensor norm(), abs().max(), var(), isfinite().logical_not().sum()
// "of copy bw" = the collector's read bandwidth / the copy's read+write bandwidth (aim >= 80%).
// "collect() host" is the host time of the collect() call itself: microseconds when it only
// enqueues. Usage: bench_cuda_grad_stats [--check] [--model 1b|7b|all] [--runs N]
//   --check   runs the GPU correctness checks (tests/gpu/cuda_collector_checks.h) instead; exit 1
//             on failure. The stats pass as a fraction of a training step is what
//             `sp-trainer --device cuda` prints as agent overhead (not measured here).
#include <torch/torch.h>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_collector_checks.h"
#include "sp/agent/block.h"
#include "sp/agent/cuda_grad_stats_collector.h"

namespace {

struct ModelShape {
    const char* name;
    int blocks;
    std::int64_t d, f;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(2);
    }
}

// Median GPU milliseconds of `enqueue` on the current stream; `after` runs on the host once the
// timed work is done (outside the timing).
double gpu_ms(int runs, const std::function<void()>& enqueue, const std::function<void()>& after = {}) {
    const cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();
    cudaEvent_t start, stop;
    cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
    std::vector<double> ms;
    for (int i = 0; i < runs + 3; ++i) {
        cuda_ok(cudaEventRecord(start, s), "cudaEventRecord");
        enqueue();
        cuda_ok(cudaEventRecord(stop, s), "cudaEventRecord");
        cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
        if (after) after();
        float t = 0;
        cuda_ok(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
        if (i >= 3) ms.push_back(double(t));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return median(ms);
}

void bench(const ModelShape& m, int runs) {
    const std::int64_t d = m.d, f = m.f;
    const std::vector<std::vector<std::int64_t>> shapes = {{3 * d, d}, {d, d}, {f, d}, {f, d},
                                                           {d, f},     {d},    {d}};
    std::int64_t per_block = 0;
    for (const auto& s : shapes)
        per_block += std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
    const std::int64_t total = per_block * m.blocks;
    const auto opts = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
    at::Tensor flat = torch::empty({total}, opts).normal_(0.0, 1e-3);
    at::Tensor dst = torch::empty({total}, opts);
    std::vector<sp::agent::AgentBlock> blocks;
    std::vector<at::Tensor> grads;
    std::int64_t off = 0;
    for (int b = 0; b < m.blocks; ++b) {
        sp::agent::AgentBlock block;
        block.id = b;
        block.name = "blocks." + std::to_string(b);
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            const std::int64_t n =
                std::accumulate(shapes[i].begin(), shapes[i].end(), std::int64_t{1}, std::multiplies<>());
            at::Tensor g = flat.narrow(0, off, n).view(shapes[i]);
            off += n;
            // The parameter itself is never read: an empty stand-in saves a copy of the model.
            at::Tensor p = torch::empty({0}, opts).requires_grad_(true);
            p.mutable_grad() = g;
            block.param_names.push_back("p" + std::to_string(i));
            block.params.push_back(p);
            grads.push_back(g);
        }
        blocks.push_back(std::move(block));
    }
    const double bytes = double(total) * 2;
    const cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();

    const double copy = gpu_ms(runs, [&] {
        cuda_ok(
            cudaMemcpyAsync(dst.data_ptr(), flat.data_ptr(), std::size_t(bytes), cudaMemcpyDeviceToDevice, s),
            "copy");
    });

    auto collector = sp::agent::make_cuda_grad_stats_collector();
    collector->prepare(blocks);
    std::vector<double> host_us;
    const double coll = gpu_ms(
        runs,
        [&] {
            const auto t0 = std::chrono::steady_clock::now();
            collector->collect();
            host_us.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        },
        [&] { (void)collector->results(); });

    const double foreach = gpu_ms(runs, [&] {
        (void)at::_foreach_norm(grads, 2);
        for (const auto& g : grads) {
            (void)g.abs().max();
            (void)at::var(g, /*unbiased=*/false);
        }
    });
    const double naive = gpu_ms(runs, [&] {
        for (const auto& g : grads) {
            (void)g.norm();
            (void)g.abs().max();
            (void)at::var(g, /*unbiased=*/false);
            (void)g.isfinite().logical_not().sum();
        }
    });

    // collect() behind ~queued GPU work: if it synchronized, its host time would include that work.
    for (int i = 0; i < 5; ++i)
        cuda_ok(
            cudaMemcpyAsync(dst.data_ptr(), flat.data_ptr(), std::size_t(bytes), cudaMemcpyDeviceToDevice, s),
            "copy");
    const auto t0 = std::chrono::steady_clock::now();
    collector->collect();
    const double behind_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    (void)collector->results();

    const double gb = bytes / 1e9;
    std::printf("\n%s: %d blocks, %.2fB bf16 parameters, %.2f GB of gradients, %d runs\n", m.name, m.blocks,
                double(total) / 1e9, gb, runs);
    std::printf("  %-10s %10s %12s %12s\n", "row", "GPU ms", "GB/s", "vs collector");
    std::printf("  %-10s %10.3f %12.1f %12s  (read + write)\n", "copy", copy, 2 * gb / (copy / 1e3), "-");
    std::printf("  %-10s %10.3f %12.1f %12s  (read) = %.1f%% of copy bw\n", "collector", coll,
                gb / (coll / 1e3), "1.00x", 100.0 * (gb / (coll / 1e3)) / (2 * gb / (copy / 1e3)));
    std::printf("  %-10s %10.3f %12.1f %11.2fx\n", "foreach", foreach, gb / (foreach / 1e3), foreach / coll);
    std::printf("  %-10s %10.3f %12.1f %11.2fx\n", "naive", naive, gb / (naive / 1e3), naive / coll);
    std::printf(
        "  collect() host: median %.1f us; %.1f us with %.1f ms of GPU work queued ahead (no host sync if "
        "<< that)\n",
        median(host_us), behind_us, 5 * copy);
}

int run_checks() {
    int failed = 0;
    auto run = [&](const std::vector<sp::gpu_checks::Check>& checks) {
        for (const auto& [name, check] : checks) {
            const std::string e = check();
            const char* verdict = e.empty() ? "PASS" : e.rfind("SKIP:", 0) == 0 ? "SKIP" : "FAIL";
            if (verdict[0] == 'F') ++failed;
            std::printf("%s  %s%s%s\n", verdict, name.c_str(), e.empty() ? "" : ": ", e.c_str());
        }
    };
    run(sp::gpu_checks::collector_checks());
    run(sp::gpu_checks::runtime_checks());
    return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    bool check = false;
    std::string model = "all";
    int runs = 20;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--check") {
            check = true;
        } else if (a == "--model" && i + 1 < argc) {
            model = argv[++i];
        } else if (a == "--runs" && i + 1 < argc) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--check] [--model 1b|7b|all] [--runs N]\n", argv[0]);
            return 2;
        }
    }
    if (!sp::gpu_checks::have_cuda_device()) {
        std::fprintf(stderr, "no CUDA device\n");
        return 77;
    }
    if (check) return run_checks();
    torch::NoGradGuard no_grad;
    if (model == "1b" || model == "all") bench({"1B", 48, 1280, 3456}, runs);
    if (model == "7b" || model == "all") bench({"7B", 48, 3584, 9728}, runs);
    return 0;
}
