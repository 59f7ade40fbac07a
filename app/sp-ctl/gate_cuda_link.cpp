// Timing for `sp-ctl gate --link cuda` (gate_cuda_link.h).
#include "gate_cuda_link.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include "sp/cuda/dequantize_launcher.h"
#include "sp/quantize.h"

namespace sp::ctl {
namespace {

// As the CPU gate: a sample repeats the trip until it lasts this long (GPU time), then divides.
constexpr double kMinSampleSeconds = 1e-3;
constexpr std::uint64_t kMaxTripsPerSample = 1u << 16;

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("--link cuda: ") + what + ": " + cudaGetErrorString(e));
}

std::size_t align16(std::size_t n) {
    return (n + 15) / 16 * 16;
}

struct PinnedBytes {
    void* ptr = nullptr;
    explicit PinnedBytes(std::size_t n) {
        check(cudaMallocHost(&ptr, std::max<std::size_t>(n, 16)), "cudaMallocHost");
    }
    ~PinnedBytes() { (void)cudaFreeHost(ptr); }
    PinnedBytes(const PinnedBytes&) = delete;
    PinnedBytes& operator=(const PinnedBytes&) = delete;
};

struct DeviceBytes {
    void* ptr = nullptr;
    explicit DeviceBytes(std::size_t n) {
        check(cudaMalloc(&ptr, std::max<std::size_t>(n, 16)), "cudaMalloc");
    }
    ~DeviceBytes() { (void)cudaFree(ptr); }
    DeviceBytes(const DeviceBytes&) = delete;
    DeviceBytes& operator=(const DeviceBytes&) = delete;
};

sp::cuda::PackedFormat packed_format(sp::Precision p) {
    switch (p) {
        case sp::Precision::int8:
            return sp::cuda::PackedFormat::int8;
        case sp::Precision::int4:
            return sp::cuda::PackedFormat::int4;
        case sp::Precision::fp8_e4m3:
            return sp::cuda::PackedFormat::fp8_e4m3;
        default:
            return sp::cuda::PackedFormat::fp8_e5m2;
    }
}

// One weight's payload in a format: codes (BF16 bits for BF16) then, 16 bytes aligned, fp32 scales, as
// one pinned buffer copied to the device in one cudaMemcpyAsync (the runtime's batch), then, for a
// low-precision format, expanded into BF16 on the device.
class CudaLinkPath {
  public:
    CudaLinkPath(sp::Precision format, const std::vector<float>& master, std::uint64_t rows,
                 std::uint64_t cols, std::uint64_t int4_group)
        : format_(format) {
        std::vector<std::uint8_t> codes;
        std::vector<float> scales;
        pack(master, rows, cols, int4_group, codes, scales);
        scales_offset_ = align16(codes.size());
        bytes_ = scales_offset_ + sizeof(float) * scales.size();
        host_ = std::make_unique<PinnedBytes>(bytes_);
        auto* h = static_cast<unsigned char*>(host_->ptr);
        if (!codes.empty()) std::memcpy(h, codes.data(), codes.size());
        if (!scales.empty()) std::memcpy(h + scales_offset_, scales.data(), sizeof(float) * scales.size());
        device_ = std::make_unique<DeviceBytes>(bytes_);
        if (format_ != sp::Precision::bf16) out_ = std::make_unique<DeviceBytes>(2 * rows * cols);
        const auto* d = static_cast<const unsigned char*>(device_->ptr);
        packed_ = {packed_format(format),
                   d,
                   reinterpret_cast<const float*>(d + scales_offset_),
                   std::int64_t(rows),
                   std::int64_t(cols),
                   std::int64_t(int4_group)};
    }

    void run(cudaStream_t s) {
        check(cudaMemcpyAsync(device_->ptr, host_->ptr, bytes_, cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync");
        if (out_) sp::cuda::launch_dequantize(packed_, out_->ptr, sp::cuda::DequantizedType::bf16, s);
    }

    // The kernel's output against the host model of the same code (which the emulated tests hold to
    // core's reference bit for bit): a device that computes other values fails the gate instead of
    // timing them. Throws std::runtime_error naming the format, shape and first element that differs.
    void verify(cudaStream_t s) {
        if (!out_) return;  // BF16: the copy alone
        run(s);
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        const auto n = static_cast<std::size_t>(packed_.rows * packed_.cols);
        std::vector<std::uint16_t> device_out(n), host_out(n);
        check(cudaMemcpy(device_out.data(), out_->ptr, 2 * n, cudaMemcpyDeviceToHost), "cudaMemcpy");
        sp::cuda::PackedTensor on_host = packed_;
        const auto* h = static_cast<const unsigned char*>(host_->ptr);
        on_host.codes = h;
        on_host.scales = reinterpret_cast<const float*>(h + scales_offset_);
        sp::cuda::dequantize_on_host(on_host, host_out.data(), sp::cuda::DequantizedType::bf16);
        for (std::size_t i = 0; i < n; ++i) {
            if (device_out[i] == host_out[i]) continue;
            throw std::runtime_error(std::string("--link cuda: the device's ") +
                                     std::string(sp::to_string(format_)) + " dequantize of " +
                                     std::to_string(packed_.rows) + "x" + std::to_string(packed_.cols) +
                                     " differs from the host model at element " + std::to_string(i));
        }
    }

  private:
    void pack(const std::vector<float>& w, std::uint64_t rows, std::uint64_t cols, std::uint64_t group,
              std::vector<std::uint8_t>& codes, std::vector<float>& scales) const {
        switch (format_) {
            case sp::Precision::bf16:
                codes.resize(2 * w.size());
                for (std::size_t i = 0; i < w.size(); ++i) {
                    const float r = sp::round_to_bf16(w[i]);
                    std::uint32_t bits = 0;
                    std::memcpy(&bits, &r, sizeof bits);
                    const auto high = static_cast<std::uint16_t>(bits >> 16);  // the bf16 pattern
                    std::memcpy(codes.data() + 2 * i, &high, 2);
                }
                break;
            case sp::Precision::int8: {
                sp::Int8Rows q = sp::quantize_int8_rows(w.data(), rows, cols);
                codes.assign(q.q.begin(), q.q.end());
                scales = std::move(q.scales);
                break;
            }
            case sp::Precision::int4: {
                sp::Int4Groups q = sp::quantize_int4_groups(w.data(), rows, cols, group);
                codes = std::move(q.packed);
                scales = std::move(q.scales);
                break;
            }
            default: {
                sp::Fp8Rows q = sp::quantize_fp8_rows(w.data(), rows, cols, format_);
                codes = std::move(q.q);
                scales = std::move(q.scales);
                break;
            }
        }
    }

    sp::Precision format_;
    std::size_t scales_offset_ = 0, bytes_ = 0;
    std::unique_ptr<PinnedBytes> host_;
    std::unique_ptr<DeviceBytes> device_, out_;
    sp::cuda::PackedTensor packed_;
};

// A stream and two timing events.
struct Timer {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    Timer() {
        check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        check(cudaEventCreate(&start), "cudaEventCreate");
        check(cudaEventCreate(&stop), "cudaEventCreate");
    }
    ~Timer() {
        (void)cudaStreamSynchronize(stream);
        (void)cudaEventDestroy(start);
        (void)cudaEventDestroy(stop);
        (void)cudaStreamDestroy(stream);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // GPU seconds of `trips` trips of `path`, back to back on the stream.
    double seconds_for(CudaLinkPath& path, std::uint64_t trips) {
        check(cudaEventRecord(start, stream), "cudaEventRecord");
        for (std::uint64_t i = 0; i < trips; ++i) path.run(stream);
        check(cudaEventRecord(stop, stream), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0.0f;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        return double(ms) * 1e-3;
    }
};

struct Timed {
    std::unique_ptr<CudaLinkPath> path;
    std::uint64_t trips = 1;
    std::vector<double> samples;  // seconds per trip
};

// A warm-up trip (first touch of the buffers, the kernels' first launch), then as many trips as make
// a sample last kMinSampleSeconds.
std::uint64_t calibrate(Timer& timer, CudaLinkPath& path) {
    (void)timer.seconds_for(path, 1);
    const double once = timer.seconds_for(path, 1);
    if (!(once > 0.0)) return kMaxTripsPerSample;
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(kMinSampleSeconds / once)), 1,
                                     kMaxTripsPerSample);
}

}  // namespace

std::string cuda_link_unavailable() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string("no CUDA device (") + cudaGetErrorString(e) + ")";
    }
    return n > 0 ? std::string() : std::string("no CUDA device (the runtime reports none)");
}

std::string cuda_device_description() {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return "cuda";
    return std::string("cuda (") + prop.name + ", sm_" + std::to_string(prop.major) +
           std::to_string(prop.minor) + ")";
}

std::vector<sp::GateMeasurement> measure_size_cuda(sp::LayerKind kind, std::uint64_t rows, std::uint64_t cols,
                                                   const GateSweep& sweep) {
    const std::vector<float> master = master_weights(static_cast<std::size_t>(rows * cols));
    Timer timer;
    std::vector<Timed> paths;  // index 0 is BF16; then the formats in the order given
    paths.push_back(
        {std::make_unique<CudaLinkPath>(sp::Precision::bf16, master, rows, cols, sweep.int4_group), 1, {}});
    for (sp::Precision f : sweep.formats)
        paths.push_back({std::make_unique<CudaLinkPath>(f, master, rows, cols, sweep.int4_group), 1, {}});
    for (Timed& t : paths) t.path->verify(timer.stream);
    for (Timed& t : paths) t.trips = calibrate(timer, *t.path);

    for (int round = 0; round < sweep.repeats; ++round) {
        for (std::size_t k = 0; k < paths.size(); ++k) {
            Timed& t = paths[(k + static_cast<std::size_t>(round)) % paths.size()];
            t.samples.push_back(timer.seconds_for(*t.path, t.trips) / static_cast<double>(t.trips));
        }
    }
    std::vector<std::vector<double>> samples;
    samples.reserve(paths.size());
    for (Timed& t : paths) samples.push_back(std::move(t.samples));
    return medians_against_bf16(kind, rows, cols, sweep, std::move(samples));
}

}  // namespace sp::ctl
