// The distribution profiler's device path (agent/src/device_output.h): the "sample" estimator's output
// measure taken with ATen where the operands live, run here on CPU tensors, against the host path
// (the core reference on host copies) on the same samples. Per layer and per block the SNR agrees
// within 0.1 dB in every low format and the loss-change estimates agree to a relative 1e-6.
//
// Why 1e-6: both paths round the same float operands (rounded_rows_aten is the reference's
// definition, bit for bit on the host: test_rounding) and take every product in double, where a float
// product is exact; only the order of the sums differs, which moves an output by about 1e-16 of its
// size and its error y_f - y (at least 1/30 of it at these SNRs) by under 1e-13 relative. A real
// difference is far larger: one element rounded one quantum apart, one token or row paired with the
// wrong gradient, or a gradient scaled in another dtype moves the estimate by 1e-4 or more.
#include <ATen/ATen.h>

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "device_output.h"
#include "distribution_profiler.h"
#include "sp/loss_estimate.h"
#include "sp/snr.h"

using sp::Precision;
using sp::agent::AgentBlock;
using sp::agent::detail::DistributionProfiler;

namespace {

constexpr double kSnrToleranceDb = 0.1;
constexpr double kLossTolerance = 1e-6;  // relative

std::vector<float> host_floats(const at::Tensor& t) {
    const at::Tensor c = t.detach().to(at::kFloat).contiguous();
    return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

at::Tensor rows_of(const at::Tensor& t, const std::vector<std::size_t>& picked) {
    return t.index_select(0, at::tensor(std::vector<std::int64_t>(picked.begin(), picked.end()), at::kLong));
}

// Activations with a few outlier features (they set every token's scale), as in core/SNR.md.
at::Tensor activations(std::int64_t tokens, std::int64_t features) {
    at::Tensor x = at::randn({tokens, features});
    x.select(1, 3).mul_(40.0);
    x.select(1, features - 2).mul_(-25.0);
    return x;
}

// The largest differences seen (reported at the end), and whether a pair agrees: NaN with NaN, the
// same infinity, or within the tolerance.
struct Agreement {
    double snr_db = 0, loss_relative = 0;
    bool snr(double host, double device) {
        if (std::isnan(host) || std::isnan(device) || host == device)
            return said(host, device, std::isnan(host) == std::isnan(device));
        const double d = std::abs(host - device);
        snr_db = std::max(snr_db, d);
        return said(host, device, d <= kSnrToleranceDb);
    }
    bool loss(double host, double device) {
        if (std::isnan(host) || std::isnan(device) || host == device)
            return said(host, device, std::isnan(host) == std::isnan(device));
        const double d = std::abs(host - device) / std::max(std::abs(host), std::abs(device));
        loss_relative = std::max(loss_relative, d);
        return said(host, device, d <= kLossTolerance);
    }
    static bool said(double host, double device, bool agree) {
        if (!agree) qWarning("host %.17g, device %.17g", host, device);
        return agree;
    }
};
Agreement seen;

// A block of linear layers: each weight [out, in] (or stored [in, out] when `transposed`), then a bias.
AgentBlock block_of(int id, const std::vector<std::pair<std::int64_t, std::int64_t>>& out_in,
                    const std::vector<bool>& transposed) {
    AgentBlock b;
    b.id = id;
    b.name = "blocks." + std::to_string(id);
    for (std::size_t l = 0; l < out_in.size(); ++l) {
        const auto [out, in] = out_in[l];
        b.params.push_back(transposed[l] ? at::randn({in, out}).mul(0.05) : at::randn({out, in}).mul(0.05));
        b.param_names.push_back("w" + std::to_string(l));
    }
    b.params.push_back(at::randn({out_in.back().first}).mul(0.01));
    b.param_names.emplace_back("bias");
    b.transposed = transposed;
    b.transposed.push_back(false);
    return b;
}

// The profilers' model: block 0 samples 128 of its 200 output rows; block 1 has a layer stored
// [in, out] (GPT-2's Conv1D) with 160 output rows and a bf16 input; block 2's inputs hold an infinity.
std::vector<AgentBlock> model() {
    at::manual_seed(11);
    std::vector<AgentBlock> blocks;
    blocks.push_back(block_of(0, {{200, 96}}, {false}));
    blocks.push_back(block_of(1, {{64, 96}, {160, 64}}, {false, true}));
    blocks.push_back(block_of(2, {{48, 32}}, {false}));
    return blocks;
}

struct Batch {
    std::vector<std::vector<at::Tensor>> inputs, grads;  // [block][layer]
};

Batch batch_for(const std::vector<AgentBlock>& blocks) {
    at::manual_seed(12);
    Batch batch;
    for (const AgentBlock& b : blocks) {
        batch.inputs.emplace_back();
        batch.grads.emplace_back();
        for (std::size_t k = 0; k + 1 < b.params.size(); ++k) {
            const at::Tensor w = b.stored_transposed(k) ? b.params[k].t() : b.params[k];
            batch.inputs.back().push_back(activations(80, w.size(1)).reshape({2, 40, w.size(1)}));
            batch.grads.back().push_back(at::randn({2, 40, w.size(0)}).mul(1e-3));
        }
    }
    batch.inputs[1][1] = batch.inputs[1][1].to(at::kBFloat16);
    batch.inputs[2][0].select(2, 5).fill_(std::numeric_limits<float>::infinity());  // every token
    return batch;
}

struct Profiled {
    std::vector<sp::BlockSnr> snr;
    std::vector<sp::BlockLossEstimate> loss;
};

// One profiling step (10) of the model on the batch; `scramble` overwrites the parameters after the
// inputs are seen, so only the masters give the right numbers.
Profiled profile_step(bool device, bool weights_scope, bool masters, bool scramble) {
    std::vector<AgentBlock> blocks = model();
    std::vector<std::vector<at::Tensor>> master_copies;
    for (const AgentBlock& b : blocks) {
        master_copies.emplace_back();
        for (const at::Tensor& p : b.params) master_copies.back().push_back(p.clone());
    }
    sp::Config c;
    c.snr_estimator = "sample";
    c.distribution_interval_steps = 5;
    c.snr_seed = 3;
    c.precision_scope = weights_scope ? "weights" : "compute";
    DistributionProfiler::MasterSource source;
    if (masters)
        source = [&master_copies](std::size_t b, std::size_t k) -> const at::Tensor* {
            return &master_copies[b][k];
        };
    DistributionProfiler profiler(c, blocks, source);
    profiler.set_measure_on_device(device);
    const Batch batch = batch_for(blocks);
    for (std::size_t b = 0; b < blocks.size(); ++b)
        for (std::size_t l = 0; l < batch.inputs[b].size(); ++l)
            profiler.observe_input(10, int(b), int(l), batch.inputs[b][l]);
    if (scramble)
        for (AgentBlock& b : blocks)
            for (at::Tensor& p : b.params) p.copy_(at::arange(p.numel()).reshape(p.sizes()));
    for (std::size_t b = 0; b < blocks.size(); ++b)
        for (std::size_t l = 0; l < batch.grads[b].size(); ++l)
            profiler.observe_output_grad(10, int(b), int(l), batch.grads[b][l]);
    Profiled out;
    out.snr = profiler.finish(10);
    out.loss = profiler.loss_estimates();
    return out;
}

}  // namespace

class TestDistributionProfiler : public QObject {
    Q_OBJECT
  private slots:
    // One layer: the host path's errors, SNR and loss estimate against the device path's sums, on the
    // same sampled tokens and rows. INT4 groups of 64 leave a short group in each row of 96.
    void one_layer_on_both_paths_data() {
        QTest::addColumn<bool>("quantize_inputs");
        QTest::newRow("compute") << true;
        QTest::newRow("weights") << false;
    }
    void one_layer_on_both_paths() {
        QFETCH(bool, quantize_inputs);
        at::manual_seed(5);
        const std::size_t out = 200, in = 96, batch = 80, tokens = 32, rows = 128, group = 64;
        const at::Tensor w = at::randn({std::int64_t(out), std::int64_t(in)}).mul(0.05);
        const at::Tensor x = activations(std::int64_t(batch), std::int64_t(in));
        const at::Tensor g = at::randn({std::int64_t(batch), std::int64_t(out)}).mul(1e-3);
        const std::vector<std::size_t> t = sp::sample_row_indices(batch, tokens, 9, 1);
        const std::vector<std::size_t> r = sp::sample_row_indices(out, rows, 9, 2);
        const at::Tensor w_rows = rows_of(w, r), x_tokens = rows_of(x, t);
        const at::Tensor g_picked = rows_of(rows_of(g, t).t().contiguous(), r).t().contiguous();

        const std::vector<float> wh = host_floats(w_rows), xh = host_floats(x_tokens),
                                 gh = host_floats(g_picked);
        const std::vector<Precision> formats(sp::kLowFormatsCheapestFirst.begin(),
                                             sp::kLowFormatsCheapestFirst.end());
        const sp::OutputErrors host =
            sp::output_errors(formats, wh.data(), rows, in, xh.data(), tokens, group, quantize_inputs);
        const std::vector<double> host_snr = sp::output_snr_db(host);

        namespace d = sp::agent::detail;
        const at::Tensor sums = d::device_output_sums(
            d::device_output_errors(w_rows, x_tokens, group, quantize_inputs), g_picked);
        QCOMPARE(std::size_t(sums.numel()), d::device_sums_size(tokens, true));
        const double* v = sums.data_ptr<double>();
        for (std::size_t f = 0; f < formats.size(); ++f) {
            QVERIFY(seen.snr(host_snr[f], sp::output_snr_db_of_powers(v[0], v[1 + f])));
            const double* dot = v + 1 + formats.size() + f * tokens;
            const double* squares = dot + formats.size() * tokens;
            const double host_loss =
                sp::loss_change_estimate(host.error[f].data(), gh.data(), tokens, rows, out, double(batch));
            QVERIFY(seen.loss(
                host_loss, sp::loss_change_from_token_sums(dot, squares, tokens, rows, out, double(batch))));
            QVERIFY(host_loss > 0);
            // The core's two entry points are one formula: from the host's own sums, bit for bit.
            std::vector<double> hd(tokens), hs(tokens);
            for (std::size_t k = 0; k < tokens * rows; ++k) {
                const double a = double(gh[k]) * host.error[f][k];
                hd[k / rows] += a;
                hs[k / rows] += a * a;
            }
            QCOMPARE(sp::loss_change_from_token_sums(hd.data(), hs.data(), tokens, rows, out, double(batch)),
                     host_loss);
        }
    }

    // The whole profiler: per block (several layers, sampled and unsampled rows, a transposed weight, a
    // bf16 input, a block whose input holds an infinity) the same SNR and loss estimates from both paths,
    // measured from the masters (scrambled parameters: only the masters are right) or the parameters.
    void profiler_on_both_paths_data() {
        QTest::addColumn<bool>("weights_scope");
        QTest::addColumn<bool>("masters");
        QTest::newRow("compute, parameters") << false << false;
        QTest::newRow("compute, masters") << false << true;
        QTest::newRow("weights, masters") << true << true;
    }
    void profiler_on_both_paths() {
        QFETCH(bool, weights_scope);
        QFETCH(bool, masters);
        const Profiled host = profile_step(false, weights_scope, masters, masters);
        const Profiled device = profile_step(true, weights_scope, masters, masters);
        QCOMPARE(device.snr.size(), std::size_t(3));
        QCOMPARE(host.snr.size(), device.snr.size());
        for (std::size_t b = 0; b < host.snr.size(); ++b)
            for (Precision p : sp::kLowFormatsCheapestFirst) {
                const double h = host.snr[b].snr_db[std::size_t(p)];
                QVERIFY2(b == 2 ? std::isnan(h) : std::isfinite(h), std::to_string(h).c_str());
                QVERIFY(seen.snr(h, device.snr[b].snr_db[std::size_t(p)]));
            }
        QCOMPARE(host.loss.size(), std::size_t(2));  // block 2's output is not finite: no estimate
        QCOMPARE(device.loss.size(), host.loss.size());
        for (std::size_t i = 0; i < host.loss.size(); ++i) {
            QCOMPARE(device.loss[i].block_id, host.loss[i].block_id);
            for (Precision p : sp::kLowFormatsCheapestFirst)
                QVERIFY(seen.loss(host.loss[i].loss_delta[std::size_t(p)],
                                  device.loss[i].loss_delta[std::size_t(p)]));
        }
        if (!masters) return;
        // The masters were read, not the scrambled parameters.
        const Profiled unscrambled = profile_step(false, weights_scope, false, false);
        for (std::size_t b = 0; b < 2; ++b)
            for (Precision p : sp::kLowFormatsCheapestFirst)
                QCOMPARE(host.snr[b].snr_db[std::size_t(p)], unscrambled.snr[b].snr_db[std::size_t(p)]);
    }

    void cleanupTestCase() {
        qInfo("largest host/device differences: SNR %.3g dB, loss estimate %.3g relative", seen.snr_db,
              seen.loss_relative);
    }
};

QTEST_GUILESS_MAIN(TestDistributionProfiler)
#include "test_distribution_profiler.moc"
