// The dequantize kernels (sp_cuda_dequantize; on the SIMT emulator, their real source) bit for bit
// against core's reference dequantization: payloads made by core's quantizers (sp/quantize.h) from
// random rows, laid out as agent/src/payload.cpp sends them, expanded on the device and compared with
// core's dequantize_* values (fp32 output: the same bits; BF16 output: core's round_to_bf16 of them).
// Odd shapes, rows over several tiles, INT4 groups that do not divide a row, +-0, +-inf and NaN inputs,
// FP8 subnormal and NaN codes, every one of the 256 FP8 codes of both formats and every INT4 nibble in
// both positions. The host model (the kernels' per-element code on the CPU) is held to the same bits,
// and so is a batch (launch_dequantize_batch: a block's tensors in one launch).
// Skips (QSKIP) when the CUDA runtime reports no device (never on the emulator).
#include <QtTest>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sp/cuda/dequantize_launcher.h"
#include "sp/quantize.h"

using sp::cuda::DequantizedType;
using sp::cuda::PackedFormat;

namespace {

// A payload as the runtime sends it (codes, fp32 scales) and core's dequantized values of it.
struct Payload {
    PackedFormat format = PackedFormat::int8;
    std::size_t rows = 0, cols = 0, group = 0;
    std::vector<std::uint8_t> codes;
    std::vector<float> scales;
    std::vector<float> reference;  // core's dequantize_*: rows * cols
};

Payload int8_payload(const std::vector<float>& w, std::size_t rows, std::size_t cols) {
    const sp::Int8Rows q = sp::quantize_int8_rows(w.data(), rows, cols);
    Payload p{PackedFormat::int8, rows, cols, 0, std::vector<std::uint8_t>(q.q.begin(), q.q.end()),
              q.scales,           {}};
    p.reference.resize(rows * cols);
    sp::dequantize_int8_rows(q, p.reference.data());
    return p;
}

Payload int4_payload(const sp::Int4Groups& q) {
    Payload p{PackedFormat::int4, q.rows, q.cols, q.group, q.packed, q.scales, {}};
    p.reference.resize(q.rows * q.cols);
    sp::dequantize_int4_groups(q, p.reference.data());
    return p;
}

Payload fp8_payload(const sp::Fp8Rows& q) {
    const PackedFormat f =
        q.format == sp::Precision::fp8_e4m3 ? PackedFormat::fp8_e4m3 : PackedFormat::fp8_e5m2;
    Payload p{f, q.rows, q.cols, 0, q.q, q.scales, {}};
    p.reference.resize(q.rows * q.cols);
    sp::dequantize_fp8_rows(q, p.reference.data());
    return p;
}

sp::cuda::PackedTensor packed(const Payload& p, const std::uint8_t* codes, const float* scales) {
    return {p.format, codes, scales, std::int64_t(p.rows), std::int64_t(p.cols), std::int64_t(p.group)};
}

// Random rows: normal values over many magnitudes, exact zeros of both signs, and (when `specials`)
// +-inf and NaN, which the quantizers map to saturated codes and 0.
std::vector<float> random_rows(std::mt19937_64& rng, std::size_t n, bool specials) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, 39), exponent(-30, 10);
    std::vector<float> w(n);
    for (float& x : w) {
        const int k = pick(rng);
        x = std::ldexp(normal(rng), exponent(rng));
        if (k == 0) x = 0.0f;
        if (k == 1) x = -0.0f;
        if (specials && k == 2) x = std::numeric_limits<float>::infinity();
        if (specials && k == 3) x = -std::numeric_limits<float>::infinity();
        if (specials && k == 4) x = std::numeric_limits<float>::quiet_NaN();
    }
    return w;
}

std::uint32_t float_bits(float f) {
    std::uint32_t b = 0;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

// The expected output element's bits: core's value, or its BF16 rounding.
std::uint32_t expected_bits(float reference, DequantizedType type) {
    return type == DequantizedType::f32 ? float_bits(reference)
                                        : float_bits(sp::round_to_bf16(reference)) >> 16;
}

std::uint32_t output_bits(const std::vector<unsigned char>& out, std::size_t i, DequantizedType type) {
    if (type == DequantizedType::f32) {
        float f = 0.0f;
        std::memcpy(&f, out.data() + 4 * i, 4);
        return float_bits(f);
    }
    std::uint16_t h = 0;
    std::memcpy(&h, out.data() + 2 * i, 2);
    return h;
}

// Fails (naming `who`, the payload and the first differing element) unless `out` holds core's bits.
void compare(const Payload& p, const std::vector<unsigned char>& out, DequantizedType type, const char* who,
             const QString& what) {
    for (std::size_t i = 0; i < p.reference.size(); ++i) {
        const std::uint32_t got = output_bits(out, i, type), want = expected_bits(p.reference[i], type);
        // An fp32 NaN's payload is not IEEE's to fix (a GPU returns its canonical NaN): NaN for NaN.
        const bool both_nan = type == DequantizedType::f32 && std::isnan(p.reference[i]) &&
                              (got & 0x7F800000u) == 0x7F800000u && (got & 0x007FFFFFu) != 0;
        if (got == want || both_nan) continue;
        QFAIL(qPrintable(
            QString::asprintf("%s: %s %s %zux%zu (group %zu) element %zu (row %zu, col %zu): "
                              "0x%08x != core 0x%08x",
                              qPrintable(what), who, type == DequantizedType::f32 ? "f32" : "bf16", p.rows,
                              p.cols, p.group, i, i / p.cols, i % p.cols, unsigned(got), unsigned(want))));
    }
}

#define CUDA_OK(expr) QVERIFY2((expr) == cudaSuccess, #expr)

// Uploads `p`, expands it on the device into poisoned memory, and copies the output back.
void run_kernel(const Payload& p, DequantizedType type, std::vector<unsigned char>& out) {
    const std::size_t elem = type == DequantizedType::f32 ? 4 : 2, n = p.rows * p.cols;
    void *codes = nullptr, *scales = nullptr, *dev_out = nullptr;
    CUDA_OK(cudaMalloc(&codes, p.codes.size() + 1));
    CUDA_OK(cudaMalloc(&scales, 4 * p.scales.size() + 4));
    CUDA_OK(cudaMalloc(&dev_out, n * elem + 1));
    CUDA_OK(cudaMemcpy(codes, p.codes.data(), p.codes.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(scales, p.scales.data(), 4 * p.scales.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dev_out, 0xA5, n * elem + 1));  // no element left unwritten passes
    sp::cuda::launch_dequantize(
        packed(p, static_cast<const std::uint8_t*>(codes), static_cast<const float*>(scales)), dev_out, type,
        nullptr);
    out.assign(n * elem, 0);
    CUDA_OK(cudaMemcpy(out.data(), dev_out, n * elem, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(codes));
    CUDA_OK(cudaFree(scales));
    CUDA_OK(cudaFree(dev_out));
}

// The kernels and the host model, both output types, against core.
void check(const Payload& p, const QString& what) {
    for (const DequantizedType type : {DequantizedType::f32, DequantizedType::bf16}) {
        std::vector<unsigned char> out;
        run_kernel(p, type, out);
        if (QTest::currentTestFailed()) return;
        compare(p, out, type, "kernel", what);
        if (QTest::currentTestFailed()) return;
        std::vector<unsigned char> host(p.rows * p.cols * (type == DequantizedType::f32 ? 4 : 2));
        sp::cuda::dequantize_on_host(packed(p, p.codes.data(), p.scales.data()), host.data(), type);
        compare(p, host, type, "host model", what);
        if (QTest::currentTestFailed()) return;
    }
}

// Every payload of `batch` (one format) uploaded, expanded by one launch_dequantize_batch into poisoned
// memory, and each compared with core.
void check_batch(const std::vector<Payload>& batch, DequantizedType type, const QString& what) {
    const std::size_t elem = type == DequantizedType::f32 ? 4 : 2;
    std::vector<sp::cuda::PackedTensor> in;
    std::vector<void*> out, owned;
    for (const Payload& p : batch) {
        void *codes = nullptr, *scales = nullptr, *dev_out = nullptr;
        CUDA_OK(cudaMalloc(&codes, p.codes.size() + 1));
        CUDA_OK(cudaMalloc(&scales, 4 * p.scales.size() + 4));
        CUDA_OK(cudaMalloc(&dev_out, p.rows * p.cols * elem + 1));
        CUDA_OK(cudaMemcpy(codes, p.codes.data(), p.codes.size(), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(scales, p.scales.data(), 4 * p.scales.size(), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(dev_out, 0xA5, p.rows * p.cols * elem + 1));
        in.push_back(packed(p, static_cast<const std::uint8_t*>(codes), static_cast<const float*>(scales)));
        out.push_back(dev_out);
        owned.insert(owned.end(), {codes, scales, dev_out});
    }
    sp::cuda::launch_dequantize_batch(in.data(), out.data(), in.size(), type, nullptr);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        std::vector<unsigned char> host(batch[i].rows * batch[i].cols * elem);
        CUDA_OK(cudaMemcpy(host.data(), out[i], host.size(), cudaMemcpyDeviceToHost));
        compare(batch[i], host, type, "kernel", what + QString(" batch tensor %1").arg(i));
        if (QTest::currentTestFailed()) break;
    }
    for (void* p : owned) CUDA_OK(cudaFree(p));
}

struct Shape {
    std::size_t rows, cols;
};
// Rows of one element to several tiles (1024 columns each), odd and empty shapes.
const std::vector<Shape> kShapes = {{1, 1},    {3, 7}, {5, 1000}, {17, 33}, {2, 1025},
                                    {1, 4097}, {4, 2}, {0, 5},    {4, 0}};

}  // namespace

class TestCudaDequantizeKernel : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) QSKIP("no CUDA device");
    }

    void int8_random_rows() {
        std::mt19937_64 rng(28);
        for (const Shape& s : kShapes) {
            check(int8_payload(random_rows(rng, s.rows * s.cols, true), s.rows, s.cols), "int8");
            if (QTest::currentTestFailed()) return;
        }
    }

    void int4_groups_that_do_not_divide_rows() {
        std::mt19937_64 rng(4);
        for (const Shape& s : kShapes)
            for (const std::size_t group :
                 {std::size_t(1), std::size_t(3), std::size_t(7), std::size_t(64)}) {
                const std::vector<float> w = random_rows(rng, s.rows * s.cols, true);
                check(int4_payload(sp::quantize_int4_groups(w.data(), s.rows, s.cols, group)), "int4");
                if (QTest::currentTestFailed()) return;
            }
    }

    void int4_every_nibble() {
        // Every byte value in every row, so each of the 16 codes sits in the low (even column) and the
        // high (odd column) nibble; an odd last column leaves its byte's high nibble unused; groups of 5
        // straddle bytes.
        std::mt19937_64 rng(16);
        std::uniform_real_distribution<float> scale(0.01f, 3.0f);
        for (const std::size_t cols : {std::size_t(512), std::size_t(511)}) {
            sp::Int4Groups q;
            q.rows = 3;
            q.cols = cols;
            q.group = 5;
            for (std::size_t r = 0; r < q.rows; ++r)
                for (std::size_t b = 0; b < sp::int4_bytes_per_row(cols); ++b)
                    q.packed.push_back(std::uint8_t(r == 1 ? 255 - b : b * 7 + r));
            q.scales.resize(q.rows * sp::int4_groups_per_row(cols, q.group));
            for (float& s : q.scales) s = scale(rng);
            check(int4_payload(q), "int4 every nibble");
            if (QTest::currentTestFailed()) return;
        }
    }

    void fp8_every_code_data() {
        QTest::addColumn<int>("format");
        QTest::newRow("e4m3") << int(sp::Precision::fp8_e4m3);
        QTest::newRow("e5m2") << int(sp::Precision::fp8_e5m2);
    }
    void fp8_every_code() {
        // All 256 codes (zeros, subnormals, normals, E5M2's infinities, the NaN codes) in each row, under
        // a unit scale, an inexact one, the smallest scale core makes and one that overflows the top codes.
        QFETCH(int, format);
        sp::Fp8Rows q;
        q.format = static_cast<sp::Precision>(format);
        q.scales = {1.0f, 0.37f, sp::kFp8MinScale, 3.0e37f};
        q.rows = q.scales.size();
        q.cols = 256;
        for (std::size_t r = 0; r < q.rows; ++r)
            for (std::size_t c = 0; c < q.cols; ++c) q.q.push_back(std::uint8_t(c * (2 * r + 1)));
        check(fp8_payload(q), "fp8 every code");
    }

    void fp8_random_rows_data() { fp8_every_code_data(); }
    void fp8_random_rows() {
        // Values spread over 40 binades put many codes in the subnormal range of their row's scale.
        QFETCH(int, format);
        std::mt19937_64 rng(8);
        for (const Shape& s : kShapes) {
            const std::vector<float> w = random_rows(rng, s.rows * s.cols, true);
            check(fp8_payload(
                      sp::quantize_fp8_rows(w.data(), s.rows, s.cols, static_cast<sp::Precision>(format))),
                  "fp8");
            if (QTest::currentTestFailed()) return;
        }
    }

    void a_batch_expands_as_each_tensor_alone() {
        // A block's tensors in one launch: odd shapes, an empty one, rows over several tiles; 19
        // tensors take two launches (16 + 3).
        std::mt19937_64 rng(46);
        for (const std::size_t count : {std::size_t(5), std::size_t(19)}) {
            std::vector<Payload> int8s, int4s, e4m3s;
            for (std::size_t i = 0; i < count; ++i) {
                const Shape& s = kShapes[i % kShapes.size()];
                const std::vector<float> w = random_rows(rng, s.rows * s.cols, true);
                int8s.push_back(int8_payload(w, s.rows, s.cols));
                int4s.push_back(int4_payload(sp::quantize_int4_groups(w.data(), s.rows, s.cols, 3 + i % 5)));
                e4m3s.push_back(
                    fp8_payload(sp::quantize_fp8_rows(w.data(), s.rows, s.cols, sp::Precision::fp8_e4m3)));
            }
            for (const DequantizedType type : {DequantizedType::f32, DequantizedType::bf16})
                for (const auto* batch : {&int8s, &int4s, &e4m3s}) {
                    check_batch(*batch, type, QString("%1 tensors").arg(count));
                    if (QTest::currentTestFailed()) return;
                }
        }
    }

    void a_batch_of_mixed_formats_is_rejected() {
        const std::uint8_t codes[4] = {};
        const float scales[2] = {};
        float out[2][4] = {};
        const sp::cuda::PackedTensor in[2] = {{PackedFormat::int8, codes, scales, 2, 2, 0},
                                              {PackedFormat::fp8_e4m3, codes, scales, 2, 2, 0}};
        void* const outs[2] = {out[0], out[1]};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::cuda::launch_dequantize_batch(
                                                            in, outs, 2, DequantizedType::f32, nullptr));
    }

    void bad_arguments_are_rejected() {
        const std::uint8_t codes[4] = {};
        const float scales[2] = {};
        float out[4] = {};
        sp::cuda::PackedTensor t{PackedFormat::int4, codes, scales, 2, 2, 0};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::cuda::launch_dequantize(t, out, DequantizedType::f32, nullptr));
        t.group = 2;
        t.rows = -1;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::cuda::launch_dequantize(t, out, DequantizedType::f32, nullptr));
        t.rows = 2;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::cuda::launch_dequantize(t, reinterpret_cast<unsigned char*>(out) + 1,
                                                             DequantizedType::bf16, nullptr));
    }
};

QTEST_GUILESS_MAIN(TestCudaDequantizeKernel)
#include "test_cuda_dequantize_kernel.moc"
