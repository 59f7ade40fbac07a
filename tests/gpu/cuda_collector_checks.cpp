#include "cuda_collector_checks.h"

#include <torch/torch.h>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "sp/agent/block.h"
#include "sp/agent/cuda_grad_stats_collector.h"
#include "sp/agent/grad_stats_collector.h"
#include "sp/cuda/grad_stats_host_model.h"
#include "sp/cuda/grad_stats_launcher.h"
#include "stream_gate.h"
#if SP_GPU_CHECKS_RUNTIME
#include "sp/agent/hints.h"
#include "sp/agent/precision_runtime.h"
#include "sp/quantize.h"
#endif

namespace sp::gpu_checks {
namespace {

// An environment variable set to something other than the empty string.
bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
}

using agent::AgentBlock;

constexpr double kRelTol = 1e-9;

bool same_bits(double a, double b) {
    std::uint64_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
}

// Bit for bit, member by member: a memcmp of the structs would also compare their padding.
bool identical(const BlockGradStats& a, const BlockGradStats& b) {
    return a.block_id == b.block_id && same_bits(a.l2_norm, b.l2_norm) && same_bits(a.max_abs, b.max_abs) &&
           same_bits(a.variance, b.variance) && same_bits(a.mean, b.mean) && a.numel == b.numel &&
           a.nonfinite_count == b.nonfinite_count;
}

bool identical(const cuda::BlockMoments& a, const cuda::BlockMoments& b) {
    return a.finite == b.finite && a.nonfinite == b.nonfinite && same_bits(a.mean, b.mean) &&
           same_bits(a.m2, b.m2) && same_bits(a.sumsq, b.sumsq) && same_bits(a.max_abs, b.max_abs);
}

at::Tensor param_with_grad(const at::Tensor& grad) {
    at::Tensor p = torch::empty(grad.sizes(), grad.options()).requires_grad_(true);
    p.mutable_grad() = grad;
    return p;
}

AgentBlock make_block(int id, std::vector<at::Tensor> params) {
    AgentBlock b;
    b.id = id;
    b.name = "blocks." + std::to_string(id);
    for (std::size_t i = 0; i < params.size(); ++i) b.param_names.push_back("p" + std::to_string(i));
    b.params = std::move(params);
    return b;
}

// The same blocks with every gradient copied to the host (what the CPU collector reads).
std::vector<AgentBlock> on_host(const std::vector<AgentBlock>& blocks) {
    std::vector<AgentBlock> out;
    for (const auto& b : blocks) {
        std::vector<at::Tensor> params;
        for (const auto& p : b.params) {
            at::Tensor h = torch::empty({0}, torch::dtype(p.scalar_type())).requires_grad_(true);
            if (p.grad().defined()) h.mutable_grad() = p.grad().cpu();
            params.push_back(h);
        }
        out.push_back(make_block(b.id, std::move(params)));
    }
    return out;
}

std::string compare(const std::vector<BlockGradStats>& got, const std::vector<BlockGradStats>& want,
                    const std::string& what) {
    std::ostringstream err;
    err.precision(17);
    if (got.size() != want.size()) {
        err << what << ": " << got.size() << " blocks, CPU has " << want.size();
        return err.str();
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
        const BlockGradStats& g = got[i];
        const BlockGradStats& w = want[i];
        const double finite = double(w.numel - w.nonfinite_count);
        const double rms = finite > 0 ? w.l2_norm / std::sqrt(finite) : 0.0;
        auto rel = [](double a, double b) {
            return std::fabs(a - b) <= kRelTol * std::fabs(b) || (a == 0 && b == 0);
        };
        if (g.block_id != w.block_id || g.numel != w.numel || g.nonfinite_count != w.nonfinite_count ||
            g.max_abs != w.max_abs || !rel(g.l2_norm, w.l2_norm) || !rel(g.variance, w.variance) ||
            std::fabs(g.mean - w.mean) > kRelTol * (std::fabs(w.mean) + rms)) {
            err << what << ": block " << w.block_id << ": cuda {numel " << g.numel << ", nonfinite "
                << g.nonfinite_count << ", max " << g.max_abs << ", l2 " << g.l2_norm << ", mean " << g.mean
                << ", var " << g.variance << "} cpu {numel " << w.numel << ", nonfinite " << w.nonfinite_count
                << ", max " << w.max_abs << ", l2 " << w.l2_norm << ", mean " << w.mean << ", var "
                << w.variance << "}";
            return err.str();
        }
    }
    return "";
}

std::string against_cpu(agent::GradStatsCollector& cuda, const std::vector<AgentBlock>& blocks,
                        const std::string& what) {
    cuda.collect();
    const std::vector<BlockGradStats> got = cuda.results();
    auto cpu = agent::make_cpu_grad_stats_collector();
    const auto host = on_host(blocks);
    cpu->prepare(host);
    cpu->collect();
    return compare(got, cpu->results(), what);
}

at::Tensor random_grad(std::mt19937_64& rng, at::IntArrayRef shape, at::ScalarType dtype) {
    const double scale = 1e-3 * double(1 + rng() % 1000);
    const double offset = rng() % 3 == 0 ? 0.5 : 0.0;  // some far from zero mean: cancellation
    at::Tensor g =
        (torch::randn(shape, torch::dtype(torch::kDouble).device(torch::kCUDA)) * scale + offset).to(dtype);
    const std::int64_t n = g.numel();
    const int specials = n > 0 ? int(rng() % 4) - 1 : 0;  // mostly none
    const double values[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
    for (int i = 0; i < specials; ++i)
        g.view({-1}).narrow(0, std::int64_t(rng() % std::uint64_t(n)), 1).fill_(values[i % 3]);
    return g;
}

std::vector<AgentBlock> random_blocks(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::vector<std::vector<std::int64_t>> shapes = {
        {0}, {1}, {7}, {33, 3}, {257, 129}, {65537}, {1000, 301}, {3, 0, 5}, {2, 65536}, {9}};
    const at::ScalarType dtypes[] = {at::kFloat, at::kBFloat16, at::kHalf};
    std::vector<AgentBlock> blocks;
    for (int b = 0; b < 7; ++b) {
        std::vector<at::Tensor> params;
        const int n = b == 6 ? 0 : 1 + int(rng() % 6);  // block 6: no parameters
        for (int i = 0; i < n; ++i) {
            const auto& shape = shapes[rng() % shapes.size()];
            const at::ScalarType dtype = dtypes[rng() % 3];
            if (rng() % 5 == 0 && shape.size() == 2 && shape[1] > 1) {
                // Non-dense: every other column of a wider tensor.
                at::Tensor wide = random_grad(rng, {shape[0], 2 * shape[1]}, dtype);
                params.push_back(param_with_grad(wide.slice(1, 0, 2 * shape[1], 2)));
            } else if (rng() % 7 == 0) {
                at::Tensor p =
                    torch::empty(shape, torch::dtype(dtype).device(torch::kCUDA)).requires_grad_(true);
                params.push_back(p);  // no gradient
            } else {
                params.push_back(param_with_grad(random_grad(rng, shape, dtype)));
            }
        }
        blocks.push_back(make_block(b, std::move(params)));
    }
    return blocks;
}

std::string random_lists() {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        const auto blocks = random_blocks(seed);
        auto c = agent::make_cuda_grad_stats_collector();
        c->prepare(blocks);
        if (auto e = against_cpu(*c, blocks, "seed " + std::to_string(seed)); !e.empty()) return e;
        // A second collect on the same plan gives bit-identical results (fixed merge order).
        const std::vector<BlockGradStats> first = c->results();
        c->collect();
        const auto& second = c->results();
        for (std::size_t i = 0; i < first.size(); ++i)
            if (!identical(first[i], second[i]))
                return "seed " + std::to_string(seed) + ": not deterministic";
    }
    return "";
}

std::string plan_refresh() {
    auto blocks = random_blocks(42);
    auto c = agent::make_cuda_grad_stats_collector();
    c->prepare(blocks);
    if (auto e = against_cpu(*c, blocks, "initial"); !e.empty()) return e;
    torch::NoGradGuard no_grad;
    for (auto& b : blocks)  // in place: same storage, no re-plan needed
        for (auto& p : b.params)
            if (p.grad().defined()) p.mutable_grad().mul_(3.0);
    if (auto e = against_cpu(*c, blocks, "in place"); !e.empty()) return e;
    std::mt19937_64 rng(43);
    for (auto& b : blocks)  // storage moves: fresh tensors, one grad dropped, one appears
        for (std::size_t i = 0; i < b.params.size(); ++i) {
            at::Tensor& p = b.params[i];
            if (i == 0 && p.grad().defined())
                p.mutable_grad() = at::Tensor();
            else
                p.mutable_grad() = random_grad(rng, p.sizes(), p.scalar_type());
        }
    return against_cpu(*c, blocks, "moved");
}

std::string huge_tensor() {
    // compute-sanitizer runs skip it: 2^31 elements under memcheck take minutes.
    if (env_flag("SP_GPU_CHECKS_SKIP_HUGE")) return "SKIP: SP_GPU_CHECKS_SKIP_HUGE is set";
    const std::int64_t n = (std::int64_t{1} << 31) + 1001;
    std::size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return "cudaMemGetInfo failed";
    if (free_bytes < std::size_t(n) * 2 * 2) return "SKIP: needs 8 GiB of free device memory";
    at::Tensor g = torch::randn({n}, torch::dtype(torch::kBFloat16).device(torch::kCUDA)).mul_(1e-3);
    g.narrow(0, n - 7, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    g.narrow(0, (std::int64_t{1} << 31) + 3, 1).fill_(5.0);  // the max, past element 2^31
    const std::vector<AgentBlock> blocks = {make_block(0, {param_with_grad(g)})};
    auto c = agent::make_cuda_grad_stats_collector();
    c->prepare(blocks);
    return against_cpu(*c, blocks, "2^31 + 1001 bf16 elements");
}

// The kernels (through the launcher, on raw pointers) against their host model, which replays them in
// the same order and must agree bit for bit. Each gradient is copied to a host arena at an address
// congruent to its device address modulo 256, so that both plans cut the same chunks.
std::string kernels_match_host_model() {
    for (std::uint64_t seed = 11; seed <= 14; ++seed) {
        const auto blocks = random_blocks(seed);
        std::vector<at::Tensor> dense;  // keeps the contiguous device copies alive
        std::vector<cuda::GradTensorDesc> on_device;
        std::vector<std::size_t> host_offset;
        std::size_t host_bytes = 0;
        for (std::size_t b = 0; b < blocks.size(); ++b)
            for (const auto& p : blocks[b].params) {
                if (!p.grad().defined() || p.grad().numel() == 0) continue;
                const at::Tensor g = p.grad().contiguous();
                const auto dtype = g.scalar_type() == at::kFloat      ? cuda::GradDType::f32
                                   : g.scalar_type() == at::kBFloat16 ? cuda::GradDType::bf16
                                                                      : cuda::GradDType::f16;
                on_device.push_back({g.data_ptr(), g.numel(), dtype, int(b)});
                const std::size_t offset =
                    (host_bytes + 255) / 256 * 256 + reinterpret_cast<std::uintptr_t>(g.data_ptr()) % 256;
                host_offset.push_back(offset);
                host_bytes = offset + std::size_t(g.nbytes());
                dense.push_back(g);
            }
        std::vector<unsigned char> storage(host_bytes + 512);
        unsigned char* base = storage.data() + (256 - reinterpret_cast<std::uintptr_t>(storage.data()) % 256);
        std::vector<cuda::GradTensorDesc> on_host = on_device;
        for (std::size_t i = 0; i < on_device.size(); ++i) {
            on_host[i].data = base + host_offset[i];
            if (cudaMemcpy(base + host_offset[i], on_device[i].data, std::size_t(dense[i].nbytes()),
                           cudaMemcpyDeviceToHost) != cudaSuccess)
                return "cudaMemcpy to the host arena failed";
        }
        const int n_blocks = int(blocks.size());
        cuda::GradStatsLauncher launcher;
        const cuda::Stream s = c10::cuda::getCurrentCUDAStream().stream();
        launcher.set_plan(cuda::build_grad_stats_plan(on_device, n_blocks), s);
        launcher.launch(s);
        const std::vector<cuda::BlockMoments> got = launcher.results();
        const std::vector<cuda::BlockMoments> want =
            cuda::grad_stats_on_host(cuda::build_grad_stats_plan(on_host, n_blocks));
        for (int b = 0; b < n_blocks; ++b) {
            const auto& g = got[std::size_t(b)];
            const auto& w = want[std::size_t(b)];
            if (!identical(g, w)) {
                std::ostringstream err;
                err.precision(17);
                err << "seed " << seed << " block " << b << ": device {finite " << g.finite << ", nonfinite "
                    << g.nonfinite << ", mean " << g.mean << ", m2 " << g.m2 << ", sumsq " << g.sumsq
                    << ", max " << g.max_abs << "} host model {finite " << w.finite << ", nonfinite "
                    << w.nonfinite << ", mean " << w.mean << ", m2 " << w.m2 << ", sumsq " << w.sumsq
                    << ", max " << w.max_abs << "}";
                return err.str();
            }
        }
    }
    return "";
}

std::string collect_does_not_sync() {
    // compute-sanitizer's initcheck serializes the work it tracks, so "no host wait" cannot hold there.
    if (env_flag("SP_GPU_CHECKS_SKIP_NOSYNC")) return "SKIP: SP_GPU_CHECKS_SKIP_NOSYNC is set";
    const auto blocks = random_blocks(7);
    auto c = agent::make_cuda_grad_stats_collector();
    c->prepare(blocks);
    c->collect();  // builds the plan (set_plan may wait once, when pinned memory grows)
    (void)c->results();
    sp::test::StreamGate gate;
    const cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();
    if (cudaLaunchHostFunc(s, &sp::test::StreamGate::hold, &gate) != cudaSuccess)
        return "cudaLaunchHostFunc failed";
    c->collect();
    gate.open = true;
    if (gate.timed_out) return "collect() waited for the device";
    return against_cpu(*c, blocks, "after the gate");
}

#if SP_GPU_CHECKS_RUNTIME
std::string runtime_bit_exact() {
    torch::manual_seed(3);
    std::vector<at::Tensor> params = {
        torch::randn({64, 33}, torch::device(torch::kCUDA)).requires_grad_(true),
        torch::randn({17}, torch::device(torch::kCUDA)).requires_grad_(true)};
    std::vector<at::Tensor> masters;
    masters.reserve(params.size());
    for (const auto& p : params) masters.push_back(p.detach().cpu().clone());
    agent::ReferencePrecisionRuntime rt({make_block(0, params)});
    auto expect = [&](Precision prec) -> std::string {
        for (std::size_t k = 0; k < params.size(); ++k) {
            at::Tensor want;
            if (prec == Precision::bf16) {
                want = masters[k].to(at::kBFloat16).to(at::kFloat);
            } else {
                const std::int64_t rows = masters[k].dim() >= 2 ? masters[k].size(0) : 1;
                const auto q = quantize_int8_rows(masters[k].data_ptr<float>(), std::size_t(rows),
                                                  std::size_t(masters[k].numel() / rows));
                want = torch::from_blob(dequantize_int8(q).data(), masters[k].sizes(), torch::kFloat).clone();
            }
            if (!torch::equal(params[k].detach().cpu(), want))
                return std::string("parameter ") + std::to_string(k) +
                       " differs from the host reference in " + std::string(to_string(prec));
        }
        return "";
    };
    if (auto e = expect(Precision::bf16); !e.empty()) return e;
    agent::PrecisionHints h;
    h.precision = {Precision::int8};
    rt.on_hints(h);
    rt.before_optimizer_step();
    rt.after_optimizer_step();
    if (auto e = expect(Precision::int8); !e.empty()) return e;
    const std::uint64_t int8_bytes = 64 * 33 + 4 * 64 + 17 + 4;
    // The step holds on_hints' materialization and the one after the step.
    if (rt.step_bytes().copied != 2 * int8_bytes)
        return "step bytes " + std::to_string(rt.step_bytes().copied) + ", want " +
               std::to_string(2 * int8_bytes);
    return "";
}
#endif

}  // namespace

bool have_cuda_device() {
    return torch::cuda::is_available();
}

std::vector<Check> collector_checks() {
    return {{"random lists vs CPU collector", random_lists},
            {"kernels vs host model (bit for bit)", kernels_match_host_model},
            {"plan refresh", plan_refresh},
            {"more than 2^31 elements", huge_tensor},
            {"collect() does not sync", collect_does_not_sync}};
}

std::vector<Check> runtime_checks() {
#if SP_GPU_CHECKS_RUNTIME
    return {{"runtime staged upload is bit-exact", runtime_bit_exact}};
#else
    return {};
#endif
}

}  // namespace sp::gpu_checks
