#include "cuda_staged_upload.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "cuda_dequantize_param.h"
#include "sp/cuda/dequantize_launcher.h"

namespace sp::agent::detail {
namespace {

// Payload pieces start on 16-byte boundaries, so the device arena's byte slices can be viewed as
// bf16 / int8 / fp32 tensors.
std::size_t align16(std::size_t n) {
    return (n + 15) / 16 * 16;
}

std::optional<sp::cuda::PackedFormat> kernel_format(Precision p) {
    switch (p) {
        case Precision::int8:
            return sp::cuda::PackedFormat::int8;
        case Precision::int4:
            return sp::cuda::PackedFormat::int4;
        case Precision::fp8_e4m3:
            return sp::cuda::PackedFormat::fp8_e4m3;
        case Precision::fp8_e5m2:
            return sp::cuda::PackedFormat::fp8_e5m2;
        case Precision::bf16:
            break;
    }
    return std::nullopt;
}

}  // namespace

bool KernelBatch::add(const unsigned char* arena, std::size_t values_offset, std::size_t scales_offset,
                      const Payload& meta, const at::Tensor& param) {
    const std::optional<sp::cuda::PackedFormat> format = kernel_format(meta.precision);
    const bool f32 = param.scalar_type() == at::kFloat;
    if (!format || !(f32 || param.scalar_type() == at::kBFloat16) || !param.is_contiguous() ||
        param.numel() != meta.rows * meta.cols)
        return false;
    const sp::cuda::PackedTensor packed{*format,
                                        arena + values_offset,
                                        reinterpret_cast<const float*>(arena + scales_offset),
                                        meta.rows,
                                        meta.cols,
                                        static_cast<std::int64_t>(meta.group)};
    items_.push_back(
        {packed, param.data_ptr(), f32 ? sp::cuda::DequantizedType::f32 : sp::cuda::DequantizedType::bf16});
    params_.push_back(param);
    return true;
}

void KernelBatch::launch(cudaStream_t stream) {
    // Runs of one format and output type, each one batched launch.
    std::stable_sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) {
        return std::pair(a.in.format, a.type) < std::pair(b.in.format, b.type);
    });
    std::vector<sp::cuda::PackedTensor> in;
    std::vector<void*> out;
    for (std::size_t first = 0; first < items_.size();) {
        std::size_t end = first;
        in.clear();
        out.clear();
        for (; end < items_.size() && items_[end].in.format == items_[first].in.format &&
               items_[end].type == items_[first].type;
             ++end) {
            in.push_back(items_[end].in);
            out.push_back(items_[end].out);
        }
        sp::cuda::launch_dequantize_batch(in.data(), out.data(), in.size(), items_[first].type, stream);
        first = end;
    }
    for (const at::Tensor& p : params_) p.unsafeGetTensorImpl()->bump_version();
    items_.clear();
    params_.clear();
}

namespace {
c10::Device require_cuda(c10::Device device) {
    if (!device.is_cuda()) throw std::invalid_argument("CudaStagedUploader: not a CUDA device");
    return device;
}
}  // namespace

CudaStagedUploader::CudaStagedUploader(c10::Device device)
    : device_(require_cuda(device)), expander_(device_) {
    c10::cuda::CUDAGuard guard(device_);
    side_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()).stream();
    cudaEvent_t e = nullptr;
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    copied_ = e;
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    consumed_ = e;
}

CudaStagedUploader::~CudaStagedUploader() {
    c10::cuda::CUDAGuard guard(device_);
    if (in_flight_) (void)cudaEventSynchronize(copied_);  // staging must outlive the copy
    (void)cudaEventDestroy(copied_);
    (void)cudaEventDestroy(consumed_);
}

void CudaStagedUploader::reserve(std::size_t staged, std::size_t arena) {
    const bool staging_fits = staged == 0 || (staging_.defined() && std::size_t(staging_.numel()) >= staged);
    const bool arena_fits = arena_.defined() && std::size_t(arena_.numel()) >= arena;
    if (staging_fits && arena_fits) return;
    // Growing: the old buffers may still be in use (staging by the copy, arena by the expansion).
    if (in_flight_) C10_CUDA_CHECK(cudaEventSynchronize(consumed_));
    if (!staging_fits)
        staging_ = at::empty({static_cast<std::int64_t>(staged)},
                             at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    if (!arena_fits)
        arena_ = at::empty({static_cast<std::int64_t>(arena)},
                           at::TensorOptions().dtype(at::kByte).device(device_));
}

void CudaStagedUploader::begin() {
    items_.clear();
    packing_.clear();
}

void CudaStagedUploader::wait_for_copy() {
    c10::cuda::CUDAGuard guard(device_);
    if (in_flight_) C10_CUDA_CHECK(cudaEventSynchronize(copied_));
}

void CudaStagedUploader::pin(Payload& payload) {
    payload.pinned_scales_offset = align16(payload.values.size());
    const auto n =
        static_cast<std::int64_t>(payload.pinned_scales_offset + payload.scales.size() * sizeof(float));
    payload.pinned = at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    auto* bytes = static_cast<unsigned char*>(payload.pinned.data_ptr());
    if (!payload.values.empty()) std::memcpy(bytes, payload.values.data(), payload.values.size());
    if (!payload.scales.empty())
        std::memcpy(bytes + payload.pinned_scales_offset, payload.scales.data(),
                    payload.scales.size() * sizeof(float));
}

void CudaStagedUploader::add(const at::Tensor& param, const Payload& payload) {
    if (!param.is_cuda()) throw std::invalid_argument("CudaStagedUploader: expects a CUDA parameter");
    if (param.device() != device_)
        throw std::invalid_argument("CudaStagedUploader: parameters on more than one CUDA device");
    Item it;
    it.param = param;
    it.meta.precision = payload.precision;
    it.meta.rows = payload.rows;
    it.meta.cols = payload.cols;
    it.meta.group = payload.group;
    it.values_bytes = payload.values.size();
    it.scales_count = payload.scales.size();
    if (payload.pinned.defined()) {
        // Placed after the staged part in finish(), once its size is known.
        it.pinned = &payload.pinned;
        it.pinned_scales_offset = payload.pinned_scales_offset;
        items_.push_back(std::move(it));
        return;
    }
    it.values_offset = align16(packing_.size());
    it.scales_offset = align16(it.values_offset + it.values_bytes);
    packing_.resize(it.scales_offset + it.scales_count * sizeof(float));
    if (it.values_bytes)
        std::memcpy(packing_.data() + it.values_offset, payload.values.data(), it.values_bytes);
    if (it.scales_count)
        std::memcpy(packing_.data() + it.scales_offset, payload.scales.data(),
                    it.scales_count * sizeof(float));
    items_.push_back(std::move(it));
}

std::uint64_t CudaStagedUploader::finish() {
    c10::cuda::CUDAGuard guard(device_);
    const std::size_t staged = packing_.size();
    std::size_t bytes = staged;
    for (Item& it : items_) {
        if (!it.pinned) continue;
        it.values_offset = align16(bytes);
        it.scales_offset = it.values_offset + it.pinned_scales_offset;
        bytes = it.scales_offset + it.scales_count * sizeof(float);
    }
    if (bytes == 0) return 0;
    // The previous batch's copy must be done reading the staging before it is overwritten (a batch of
    // pinned payloads only does not touch the staging, and does not wait).
    if (in_flight_ && staged) C10_CUDA_CHECK(cudaEventSynchronize(copied_));
    reserve(staged, bytes);
    if (staged) std::memcpy(staging_.data_ptr(), packing_.data(), staged);

    auto side = static_cast<cudaStream_t>(side_stream_);
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
    // The side stream may overwrite the device arena only after the compute stream has read it.
    if (in_flight_) C10_CUDA_CHECK(cudaStreamWaitEvent(side, consumed_, 0));
    auto* arena = static_cast<unsigned char*>(arena_.data_ptr());
    if (staged)
        C10_CUDA_CHECK(cudaMemcpyAsync(arena, staging_.data_ptr(), staged, cudaMemcpyHostToDevice, side));
    for (const Item& it : items_)
        if (it.pinned && it.pinned->numel() > 0)
            C10_CUDA_CHECK(cudaMemcpyAsync(arena + it.values_offset, it.pinned->data_ptr(),
                                           std::size_t(it.pinned->numel()), cudaMemcpyHostToDevice, side));
    C10_CUDA_CHECK(cudaEventRecord(copied_, side));
    C10_CUDA_CHECK(cudaStreamWaitEvent(compute, copied_, 0));
    in_flight_ = true;

    // Expansion on the compute stream (the current one), ordered after the copy.
    std::uint64_t payload = 0;  // what crossed the bus: the payload minus the alignment padding
    KernelBatch kernels;        // the batch's kernel-expanded payloads: one launch
    for (const Item& it : items_) {
        payload += it.values_bytes + it.scales_count * sizeof(float);
        if (kernels.add(arena, it.values_offset, it.scales_offset, it.meta, it.param)) continue;
        const at::Tensor values = arena_.narrow(0, static_cast<std::int64_t>(it.values_offset),
                                                static_cast<std::int64_t>(it.values_bytes));
        const at::Tensor scales = arena_
                                      .narrow(0, static_cast<std::int64_t>(it.scales_offset),
                                              static_cast<std::int64_t>(it.scales_count * sizeof(float)))
                                      .view(at::kFloat);
        expander_.expand(values, scales, it.meta, it.param);
    }
    kernels.launch(compute);
    C10_CUDA_CHECK(cudaEventRecord(consumed_, compute));
    return payload;
}

}  // namespace sp::agent::detail
