#include "cuda_staged_upload.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>

#include "materialize.h"
#include "sp/quantize.h"

namespace sp::agent::detail {
namespace {

// Payload pieces start on 16-byte boundaries, so the device arena's byte slices can be viewed as
// bf16 / int8 / fp32 tensors.
std::size_t align16(std::size_t n) {
    return (n + 15) / 16 * 16;
}

}  // namespace

CudaStagedUploader::CudaStagedUploader(c10::Device device) : device_(device) {
    if (!device.is_cuda()) throw std::invalid_argument("CudaStagedUploader: not a CUDA device");
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

void CudaStagedUploader::reserve(std::size_t bytes) {
    if (staging_.defined() && std::size_t(staging_.numel()) >= bytes) return;
    // Growing: the old buffers may still be in use (staging by the copy, arena by the expansion).
    if (in_flight_) C10_CUDA_CHECK(cudaEventSynchronize(consumed_));
    const auto n = static_cast<std::int64_t>(bytes);
    staging_ = at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    arena_ = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(device_));
}

void CudaStagedUploader::begin() {
    items_.clear();
    packing_.clear();
}

void CudaStagedUploader::add(const at::Tensor& param, const at::Tensor& master, Precision p) {
    if (p != Precision::bf16 && p != Precision::int8)
        throw std::invalid_argument("CudaStagedUploader: stages BF16 and INT8 payloads only, not " +
                                    std::string(to_string(p)));
    if (!param.is_cuda() || master.is_cuda() || master.scalar_type() != at::kFloat)
        throw std::invalid_argument("CudaStagedUploader: expects a CUDA parameter and an fp32 host master");
    if (param.device() != device_)
        throw std::invalid_argument("CudaStagedUploader: parameters on more than one CUDA device");
    const at::Tensor host = master.contiguous();
    Item it;
    it.param = param;
    it.precision = p;
    it.values_offset = align16(packing_.size());
    if (p == Precision::bf16) {
        const at::Tensor v = host.to(at::kBFloat16);  // round-to-nearest-even, as materialized() does
        const std::size_t bytes = std::size_t(v.numel()) * 2;
        packing_.resize(it.values_offset + bytes);
        if (bytes) std::memcpy(packing_.data() + it.values_offset, v.data_ptr(), bytes);
    } else {
        it.rows = int8_rows(host);
        it.cols = it.rows > 0 ? host.numel() / it.rows : 0;
        const Int8Rows q = host.numel() > 0 ? quantize_int8_rows(host.data_ptr<float>(), std::size_t(it.rows),
                                                                 std::size_t(it.cols))
                                            : Int8Rows{};
        it.scales_offset = align16(it.values_offset + q.q.size());
        packing_.resize(it.scales_offset + q.scales.size() * sizeof(float));
        if (!q.q.empty()) std::memcpy(packing_.data() + it.values_offset, q.q.data(), q.q.size());
        if (!q.scales.empty())
            std::memcpy(packing_.data() + it.scales_offset, q.scales.data(), q.scales.size() * sizeof(float));
    }
    items_.push_back(std::move(it));
}

std::uint64_t CudaStagedUploader::finish() {
    c10::cuda::CUDAGuard guard(device_);
    const std::size_t bytes = packing_.size();
    if (bytes == 0) return 0;
    // The previous batch's copy must be done reading the staging before it is overwritten.
    if (in_flight_) C10_CUDA_CHECK(cudaEventSynchronize(copied_));
    reserve(bytes);
    std::memcpy(staging_.data_ptr(), packing_.data(), bytes);

    auto side = static_cast<cudaStream_t>(side_stream_);
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
    // The side stream may overwrite the device arena only after the compute stream has read it.
    if (in_flight_) C10_CUDA_CHECK(cudaStreamWaitEvent(side, consumed_, 0));
    C10_CUDA_CHECK(
        cudaMemcpyAsync(arena_.data_ptr(), staging_.data_ptr(), bytes, cudaMemcpyHostToDevice, side));
    C10_CUDA_CHECK(cudaEventRecord(copied_, side));
    C10_CUDA_CHECK(cudaStreamWaitEvent(compute, copied_, 0));
    in_flight_ = true;

    // Expansion on the compute stream (the current one), ordered after the copy.
    at::NoGradGuard no_grad;
    for (const Item& it : items_) {
        const std::int64_t n = it.param.numel();
        if (n == 0) continue;
        const auto off = static_cast<std::int64_t>(it.values_offset);
        if (it.precision == Precision::bf16) {
            const at::Tensor v = arena_.narrow(0, off, 2 * n).view(at::kBFloat16).view(it.param.sizes());
            it.param.copy_(v);
        } else {
            const at::Tensor q = arena_.narrow(0, off, n).view(at::kChar).view({it.rows, it.cols});
            const at::Tensor s = arena_.narrow(0, static_cast<std::int64_t>(it.scales_offset), 4 * it.rows)
                                     .view(at::kFloat)
                                     .view({it.rows, 1});
            it.param.copy_((q.to(at::kFloat) * s).view(it.param.sizes()));
        }
    }
    C10_CUDA_CHECK(cudaEventRecord(consumed_, compute));
    // What crossed the bus: the payload minus the alignment padding between pieces.
    std::uint64_t payload = 0;
    for (const Item& it : items_)
        payload += it.precision == Precision::bf16
                       ? 2 * std::uint64_t(it.param.numel())
                       : std::uint64_t(it.param.numel()) + 4 * std::uint64_t(it.rows);
    return payload;
}

}  // namespace sp::agent::detail
