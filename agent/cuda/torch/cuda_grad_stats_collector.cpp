// make_cuda_grad_stats_collector(): LibTorch glue around sp_cuda_stats. Built only when LibTorch has
// CUDA. Per step it reads each gradient's metadata on the host (pointer, size, dtype, layout: no
// device access), rebuilds the plan only if that changed, and enqueues one launch on the current
// stream.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sp/agent/cuda_grad_stats_collector.h"
#include "sp/cuda/grad_stats_launcher.h"
#include "sp/cuda/grad_stats_plan.h"

namespace sp::agent {
namespace {

std::optional<cuda::GradDType> grad_dtype(at::ScalarType t) {
    switch (t) {
        case at::kFloat:
            return cuda::GradDType::f32;
        case at::kBFloat16:
            return cuda::GradDType::bf16;
        case at::kHalf:
            return cuda::GradDType::f16;
        default:
            return std::nullopt;
    }
}

class CudaGradStatsCollector final : public GradStatsCollector {
  public:
    void prepare(const std::vector<AgentBlock>& blocks) override {
        std::vector<const AgentBlock*> order;
        order.reserve(blocks.size());
        for (const auto& b : blocks) order.push_back(&b);
        std::stable_sort(order.begin(), order.end(),
                         [](const AgentBlock* x, const AgentBlock* y) { return x->id < y->id; });
        block_ids_.clear();
        slots_.clear();
        for (std::size_t i = 0; i < order.size(); ++i) {
            block_ids_.push_back(order[i]->id);
            for (const auto& p : order[i]->params) {
                Slot s;
                s.param = p;
                s.block = static_cast<int>(i);
                slots_.push_back(std::move(s));
            }
        }
        present_.assign(block_ids_.size(), false);
        results_.clear();
        planned_ = false;
        pending_ = false;
    }

    void collect() override {
        if (!planned_ || plan_stale()) rebuild_plan();
        if (!device_) {  // no defined gradient anywhere: nothing to read
            results_.clear();
            pending_ = false;
            return;
        }
        c10::cuda::CUDAGuard guard(*device_);
        const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_->index());
        // Non-dense gradients: a contiguous copy, enqueued on the same stream before the pass.
        for (Slot& s : slots_)
            if (s.defined && !s.dense) s.staging.copy_(s.param.grad());
        launcher_->launch(stream.stream());
        pending_ = true;
    }

    const std::vector<BlockGradStats>& results() override {
        if (!pending_) return results_;
        const std::vector<cuda::BlockMoments>& m = launcher_->results();  // waits on the event
        const cuda::GradStatsPlan& plan = launcher_->plan();
        results_.clear();
        for (std::size_t b = 0; b < m.size(); ++b) {
            if (!present_[b]) continue;
            BlockGradStats st;
            st.block_id = block_ids_[b];
            st.numel = plan.block_numel[b];
            st.nonfinite_count = m[b].nonfinite;
            st.l2_norm = std::sqrt(m[b].sumsq);
            st.max_abs = m[b].max_abs;
            st.mean = m[b].mean;
            st.variance = m[b].finite > 0 ? m[b].m2 / double(m[b].finite) : 0.0;
            results_.push_back(st);
        }
        pending_ = false;
        return results_;
    }

  private:
    // One parameter and the gradient signature the plan was built for.
    struct Slot {
        at::Tensor param;
        int block = 0;  // dense index into block_ids_
        bool defined = false;
        const void* data = nullptr;  // the grad's data pointer (dense) — staging's otherwise
        std::int64_t numel = 0;
        at::ScalarType dtype = at::kFloat;
        bool dense = true;
        c10::Device device{c10::kCPU};
        at::Tensor staging;
    };

    bool plan_stale() const {
        for (const Slot& s : slots_) {
            const at::Tensor& g = s.param.grad();
            if (g.defined() != s.defined) return true;
            if (!g.defined()) continue;
            if (g.numel() != s.numel || g.scalar_type() != s.dtype || g.device() != s.device ||
                g.is_non_overlapping_and_dense() != s.dense)
                return true;
            if (s.dense ? g.data_ptr() != s.data : !g.sizes().equals(s.staging.sizes())) return true;
        }
        return false;
    }

    void rebuild_plan() {
        planned_ = false;
        device_.reset();
        present_.assign(block_ids_.size(), false);
        std::vector<cuda::GradTensorDesc> descs;
        for (Slot& s : slots_) {
            const at::Tensor& g = s.param.grad();
            s.defined = g.defined();
            s.data = nullptr;
            s.staging = at::Tensor();
            if (!s.defined) continue;
            const auto dtype = grad_dtype(g.scalar_type());
            if (!dtype)
                throw std::invalid_argument(std::string("cuda grad stats: unsupported gradient dtype ") +
                                            c10::toString(g.scalar_type()));
            if (!g.is_cuda() || g.layout() != at::kStrided)
                throw std::invalid_argument("cuda grad stats: gradients must be strided CUDA tensors");
            if (device_ && g.device() != *device_)
                throw std::invalid_argument("cuda grad stats: gradients on more than one CUDA device");
            device_ = g.device();
            s.numel = g.numel();
            s.dtype = g.scalar_type();
            s.device = g.device();
            s.dense = g.is_non_overlapping_and_dense();
            if (!s.dense) s.staging = at::empty_like(g, at::MemoryFormat::Contiguous);
            // A dense tensor's elements fill [data_ptr, data_ptr + numel) in some order: enough for
            // statistics, so transposed or channels-last gradients are read in place.
            s.data = s.dense ? g.data_ptr() : s.staging.data_ptr();
            present_[std::size_t(s.block)] = true;
            descs.push_back(cuda::GradTensorDesc{s.data, s.numel, *dtype, s.block});
        }
        if (device_) {
            c10::cuda::CUDAGuard guard(*device_);
            if (!launcher_ || launcher_device_ != *device_) {
                launcher_ = std::make_unique<cuda::GradStatsLauncher>();
                launcher_device_ = *device_;
            }
            launcher_->set_plan(cuda::build_grad_stats_plan(descs, static_cast<int>(block_ids_.size())),
                                c10::cuda::getCurrentCUDAStream(device_->index()).stream());
        }
        planned_ = true;
    }

    std::vector<int> block_ids_;  // ascending
    std::vector<Slot> slots_;
    std::vector<bool> present_;  // per block: at least one defined gradient
    std::optional<c10::Device> device_;
    std::unique_ptr<cuda::GradStatsLauncher> launcher_;
    c10::Device launcher_device_{c10::kCPU};
    std::vector<BlockGradStats> results_;
    bool planned_ = false;
    bool pending_ = false;  // a launch whose results were not read yet
};

}  // namespace

std::unique_ptr<GradStatsCollector> make_cuda_grad_stats_collector() {
    return std::make_unique<CudaGradStatsCollector>();
}

}  // namespace sp::agent
