// rounded_rows_aten, the rounding of activations and gradients on an accelerator, against the core
// reference (sp::roundtrip) bit for bit (tools/rounding_check: every format, odd shapes, INT4 groups
// that do not divide a row, ties, zeros of both signs, FP8 subnormals and every binade, saturation,
// NaN and infinities): on the host, and on a CUDA device when there is one.
#include <torch/torch.h>

#include <QtTest>

#include <stdexcept>

#include "rounding_check.h"
#include "sp/agent/rounding.h"

using sp::Precision;

class TestRounding : public QObject {
    Q_OBJECT

  private slots:
    void aten_matches_the_reference_bit_for_bit_on_the_host() {
        const std::string mismatch = sp::check::rounding_mismatch(c10::Device(c10::kCPU));
        QVERIFY2(mismatch.empty(), mismatch.c_str());
    }

    void keeps_shape_dtype_and_refuses_a_group_of_zero() {
        const torch::Tensor x = torch::randn({3, 8}).to(torch::kBFloat16);
        const torch::Tensor r = sp::agent::rounded_rows_aten(x, Precision::int8);
        QCOMPARE(r.scalar_type(), torch::kBFloat16);
        QCOMPARE(r.sizes().vec(), x.sizes().vec());
        QVERIFY(sp::agent::rounded_rows_aten(torch::empty({0, 4}), Precision::int4).numel() == 0);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::agent::rounded_rows_aten(torch::ones({2, 2}), Precision::int4, 0));
    }

    // rounded_rows of a CUDA tensor stays there and gives the host's bits.
    void on_cuda_the_same_bits_as_on_the_host() {
        if (!torch::cuda::is_available()) QSKIP("no CUDA device");
        const torch::Tensor x = torch::randn({16, 40}, torch::kCUDA);
        const torch::Tensor r = sp::agent::rounded_rows(x, Precision::fp8_e4m3);
        QVERIFY(r.is_cuda());
        QVERIFY(torch::equal(r.cpu(), sp::agent::rounded_rows(x.cpu(), Precision::fp8_e4m3)));
        const std::string mismatch = sp::check::rounding_mismatch(c10::Device(c10::kCUDA));
        QVERIFY2(mismatch.empty(), mismatch.c_str());
    }
};

QTEST_GUILESS_MAIN(TestRounding)
#include "test_rounding.moc"
