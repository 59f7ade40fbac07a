// Quantization-error calibration: the error measure, the BF16-vs-INT8 forward passes, weight
// restoration, the fingerprint and the on-disk cache.
#include <torch/torch.h>

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/torch_reference.h"
#include "sp/agent/calibration.h"
#include "sp/quantize.h"
#include "sp/simulator.h"

using sp::agent::AgentBlock;
using sp::agent::calibrate;
using sp::agent::calibration_fingerprint;
using sp::agent::CalibrationHooks;
using sp::agent::CalibrationResult;
using sp::agent::relative_output_error;
using sp::test::block_of;
using sp::test::ref_bf16;
using sp::test::ref_int8;

namespace fs = std::filesystem;

namespace {

double ref_relative_error(const torch::Tensor& a, const torch::Tensor& b) {
    const torch::Tensor ad = a.to(torch::kDouble).contiguous(), bd = b.to(torch::kDouble).contiguous();
    const double* pa = ad.data_ptr<double>();
    const double* pb = bd.data_ptr<double>();
    double na = 0.0, nd = 0.0;
    for (std::int64_t i = 0; i < ad.numel(); ++i) {
        na += pa[i] * pa[i];
        nd += (pa[i] - pb[i]) * (pa[i] - pb[i]);
    }
    return std::sqrt(nd) / std::sqrt(na);
}

std::vector<torch::Tensor> snapshot(const std::vector<AgentBlock>& blocks) {
    std::vector<torch::Tensor> out;
    for (const auto& b : blocks)
        for (const auto& p : b.params) out.push_back(p.detach().clone());
    return out;
}

bool unchanged(const std::vector<AgentBlock>& blocks, const std::vector<torch::Tensor>& before) {
    std::size_t i = 0;
    for (const auto& b : blocks)
        for (const auto& p : b.params)
            if (!torch::equal(p, before[i++])) return false;
    return true;
}

// Two Linear blocks with real inputs; counts hook calls.
struct LinearModel {
    std::vector<torch::nn::Linear> layers;
    std::vector<std::vector<torch::Tensor>> inputs;  // [block][sample]
    int input_calls = 0;
    int forward_calls = 0;

    explicit LinearModel(int samples) {
        torch::manual_seed(11);
        layers.emplace_back(torch::nn::LinearOptions(32, 16));
        layers.emplace_back(torch::nn::LinearOptions(16, 8));
        for (auto& l : layers) {
            torch::NoGradGuard g;
            l->weight.normal_();  // random normal weights
            l->bias.normal_();
            std::vector<torch::Tensor> xs;
            xs.reserve(std::size_t(samples));
            for (int s = 0; s < samples; ++s) xs.push_back(torch::randn({4, l->weight.size(1)}));
            inputs.push_back(xs);
        }
    }
    std::vector<AgentBlock> blocks() const {
        return {block_of(0, "blocks.0", *layers[0]), block_of(1, "blocks.1", *layers[1])};
    }
    CalibrationHooks hooks() {
        CalibrationHooks h;
        h.input = [this](int b, int s) {
            ++input_calls;
            return inputs.at(b).at(s);
        };
        h.forward = [this](int b, const torch::Tensor& x) {
            ++forward_calls;
            return layers.at(b)->forward(x);
        };
        return h;
    }
    // The errors, computed here from the reference materializations.
    double expected_error(std::size_t b) const {
        const auto& l = layers[b];
        double sum = 0.0;
        for (const auto& x : inputs[b]) {
            torch::NoGradGuard g;
            const torch::Tensor o16 =
                torch::nn::functional::linear(x, ref_bf16(l->weight), ref_bf16(l->bias));
            const torch::Tensor o8 = torch::nn::functional::linear(x, ref_int8(l->weight), ref_int8(l->bias));
            sum += ref_relative_error(o16, o8);
        }
        return sum / double(inputs[b].size());
    }
};

// A block whose forward works for any parameter shapes and dtypes: x * sum of its parameters.
struct SumBlock {
    std::vector<AgentBlock> blocks;
    int forward_calls = 0;
    CalibrationHooks hooks() {
        CalibrationHooks h;
        h.input = [](int, int s) { return torch::full({3}, double(s + 1)); };
        h.forward = [this](int b, const torch::Tensor& x) {
            ++forward_calls;
            torch::Tensor acc = torch::zeros({}, torch::kDouble);
            for (const auto& p : blocks.at(b).params) acc = acc + p.to(torch::kDouble).sum();
            return x.to(torch::kDouble) * acc;
        };
        return h;
    }
};

AgentBlock tensor_block(const std::string& name, std::vector<torch::Tensor> params) {
    AgentBlock b;
    b.name = name;
    for (std::size_t i = 0; i < params.size(); ++i) b.param_names.push_back("p" + std::to_string(i));
    b.params = std::move(params);
    return b;
}

class EnvGuard {
  public:
    explicit EnvGuard(const char* name) : name_(name) {
        if (qEnvironmentVariableIsSet(name)) old_ = qgetenv(name);
    }
    ~EnvGuard() {
        if (old_)
            qputenv(name_, *old_);
        else
            qunsetenv(name_);
    }

  private:
    const char* name_;
    std::optional<QByteArray> old_;
};

}  // namespace

class TestCalibration : public QObject {
    Q_OBJECT

  private slots:
    void relative_error_values() {
        QCOMPARE(relative_output_error(torch::tensor({3.0f, 4.0f}), torch::tensor({3.0f, 0.0f})), 0.8);
        QCOMPARE(relative_output_error(torch::tensor({1.0f, 2.0f}), torch::tensor({1.0f, 2.0f})), 0.0);
        // Computed in double: a difference far below float's epsilon relative to ||a|| still shows.
        const torch::Tensor a = torch::tensor({1.0, 1e-12}, torch::kDouble);
        const torch::Tensor b = torch::tensor({1.0, 0.0}, torch::kDouble);
        QVERIFY(std::abs(relative_output_error(a, b) - 1e-12) < 1e-24);
        // Mixed dtypes compare as values.
        QCOMPARE(relative_output_error(torch::tensor({2.0f}), torch::tensor({1.0}, torch::kDouble)), 0.5);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 relative_output_error(torch::zeros({2, 3}), torch::zeros({3, 2})));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 relative_output_error(torch::Tensor(), torch::zeros({1})));
    }

    void relative_error_degenerate() {
        const float inf = std::numeric_limits<float>::infinity();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        QCOMPARE(relative_output_error(torch::zeros({4}), torch::zeros({4})), 0.0);
        QCOMPARE(relative_output_error(torch::zeros({4}), torch::tensor({0.0f, 0.0f, 1e-30f, 0.0f})), 1.0);
        QCOMPARE(relative_output_error(torch::zeros({0}), torch::zeros({0})), 0.0);
        QCOMPARE(relative_output_error(torch::tensor({nan, 1.0f}), torch::tensor({1.0f, 1.0f})), 1.0);
        QCOMPARE(relative_output_error(torch::tensor({1.0f, 1.0f}), torch::tensor({1.0f, inf})), 1.0);
        QCOMPARE(relative_output_error(torch::tensor({-inf}), torch::tensor({-inf})), 1.0);
        // A ratio that overflows double is reported as the ceiling, not inf.
        const double tiny = std::numeric_limits<double>::denorm_min();
        QCOMPARE(relative_output_error(torch::tensor({tiny}, torch::kDouble),
                                       torch::tensor({1e300}, torch::kDouble)),
                 1.0);
    }

    void identical_outputs_give_zero() {
        // Weights exactly representable in both: per row, integers up to 127 times a power of two,
        // the row's absmax exactly 127 * 2^k (so the INT8 scale is 2^k).
        torch::nn::Linear lin(8, 4);
        {
            torch::NoGradGuard g;
            const torch::Tensor q = torch::randint(-127, 128, {4, 8}).to(torch::kFloat);
            q.select(1, 0).fill_(127);
            const torch::Tensor pow2 = torch::tensor({0.25f, 1.0f, 8.0f, 0.0078125f}).unsqueeze(1);
            lin->weight.copy_(q * pow2);
            lin->bias.copy_(torch::tensor({-127.0f, 3.0f, 64.0f, 127.0f}) * 0.5f);
        }
        std::vector<AgentBlock> blocks{block_of(0, "blocks.0", *lin)};
        CalibrationHooks h;
        h.input = [](int, int s) { return torch::randn({5, 8}) * double(s + 1); };
        h.forward = [&](int, const torch::Tensor& x) { return lin->forward(x); };
        const CalibrationResult r = calibrate(blocks, h, 3, "exact", "");
        QCOMPARE(r.errors, std::vector<double>{0.0});

        // A block whose forward ignores its weights.
        std::vector<AgentBlock> ignoring{tensor_block("ignoring", {torch::randn({16, 16})})};
        CalibrationHooks h2;
        h2.input = [](int, int) { return torch::randn({7}); };
        h2.forward = [](int, const torch::Tensor& x) { return x * 2; };
        QCOMPARE(calibrate(ignoring, h2, 2, "ignoring", "").errors, std::vector<double>{0.0});
    }

    void linear_blocks_match_the_reference() {
        LinearModel m(3);
        const auto blocks = m.blocks();
        const auto before = snapshot(blocks);
        const void* w_ptr = m.layers[0]->weight.data_ptr();
        CalibrationHooks h = m.hooks();
        bool grad_mode_seen = false;
        const auto forward = h.forward;
        h.forward = [&](int b, const torch::Tensor& x) {
            grad_mode_seen = grad_mode_seen || torch::GradMode::is_enabled();
            return forward(b, x);
        };
        const CalibrationResult r = calibrate(blocks, h, 3, "linear", "");
        QCOMPARE(r.errors.size(), std::size_t{2});
        QCOMPARE(m.input_calls, 2 * 3);
        QCOMPARE(m.forward_calls, 2 * 3 * 2);
        QVERIFY(!grad_mode_seen);
        QVERIFY(!r.from_cache);
        QVERIFY(r.cache_path.empty());
        QCOMPARE(r.fingerprint.size(), std::size_t{16});
        for (std::size_t b = 0; b < 2; ++b) {
            QVERIFY2(r.errors[b] > 0.0 && r.errors[b] < 0.05, qPrintable(QString::number(r.errors[b])));
            const double expected = m.expected_error(b);
            QVERIFY2(std::abs(r.errors[b] - expected) <= 1e-12 * expected,
                     qPrintable(QString("%1 vs %2").arg(r.errors[b], 0, 'g', 17).arg(expected, 0, 'g', 17)));
        }
        // Restored exactly, in the same storage, still trainable.
        QVERIFY(unchanged(blocks, before));
        QCOMPARE(m.layers[0]->weight.data_ptr(), const_cast<void*>(w_ptr));
        QVERIFY(m.layers[0]->weight.requires_grad());
    }

    void input_hook_sees_original_weights() {
        LinearModel m(3);
        const auto blocks = m.blocks();
        const auto before = snapshot(blocks);
        CalibrationHooks h = m.hooks();
        const auto input = h.input;
        bool all_original = true;
        h.input = [&](int b, int s) {
            all_original = all_original && unchanged(blocks, before);
            return input(b, s);
        };
        calibrate(blocks, h, 3, "input", "");
        QVERIFY(all_original);
    }

    void fingerprint_covers_everything() {
        const auto make = [](const std::string& name, const std::string& param,
                             const std::vector<std::int64_t>& shape, torch::ScalarType dtype) {
            AgentBlock b = tensor_block(name, {torch::zeros(shape, dtype)});
            b.param_names[0] = param;
            return std::vector<AgentBlock>{b};
        };
        const auto base = make("blocks.0", "weight", {4, 8}, torch::kFloat);
        const std::string fp = calibration_fingerprint("model", base, 4);
        QCOMPARE(fp.size(), std::size_t{16});
        QVERIFY(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
        QCOMPARE(calibration_fingerprint("model", base, 4), fp);  // stable
        // Values do not enter it (the model identity stands for them).
        QCOMPARE(calibration_fingerprint("model", make("blocks.0", "weight", {4, 8}, torch::kFloat), 4), fp);

        std::vector<std::string> all{fp};
        all.push_back(calibration_fingerprint("model2", base, 4));
        all.push_back(calibration_fingerprint("model", base, 5));
        all.push_back(calibration_fingerprint("model", make("blocks.1", "weight", {4, 8}, torch::kFloat), 4));
        all.push_back(calibration_fingerprint("model", make("blocks.0", "bias", {4, 8}, torch::kFloat), 4));
        all.push_back(calibration_fingerprint("model", make("blocks.0", "weight", {8, 4}, torch::kFloat), 4));
        all.push_back(calibration_fingerprint("model", make("blocks.0", "weight", {32}, torch::kFloat), 4));
        all.push_back(
            calibration_fingerprint("model", make("blocks.0", "weight", {4, 8}, torch::kDouble), 4));
        auto two = base;
        two.push_back(base[0]);
        all.push_back(calibration_fingerprint("model", two, 4));
        // Length-prefixed strings: moving a character across a boundary changes it.
        all.push_back(calibration_fingerprint("modelb", make("locks.0", "weight", {4, 8}, torch::kFloat), 4));
        std::sort(all.begin(), all.end());
        QVERIFY(std::adjacent_find(all.begin(), all.end()) == all.end());
    }

    void cache_hit_and_cal_format() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string cache = (fs::path(dir.path().toStdString()) / "nested" / "cache").string();
        LinearModel m(2);
        const auto blocks = m.blocks();
        const CalibrationResult first = calibrate(blocks, m.hooks(), 2, "linear", cache);
        QVERIFY(!first.from_cache);
        QCOMPARE(first.cache_path,
                 (fs::path(cache) / ("calibration-" + first.fingerprint + ".json")).string());
        QVERIFY(fs::is_regular_file(first.cache_path));
        // No temporary files left behind.
        QCOMPARE(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), std::ptrdiff_t{1});

        std::ifstream in(first.cache_path);
        const nlohmann::json j = nlohmann::json::parse(in);
        QCOMPARE(j.at("fingerprint").get<std::string>(), first.fingerprint);
        QCOMPARE(j.at("model_identity").get<std::string>(), std::string("linear"));
        QCOMPARE(j.at("samples").get<int>(), 2);
        QCOMPARE(j.at("errors").at("1").get<double>(), first.errors[1]);
        // It is a CAL.json for `sp-ctl simulate`.
        std::ifstream cal(first.cache_path);
        const auto parsed = sp::parse_calibration(cal, first.cache_path);
        QCOMPARE(parsed.size(), std::size_t{2});
        QCOMPARE(parsed.at(0), first.errors[0]);

        const int calls = m.forward_calls + m.input_calls;
        const CalibrationResult second = calibrate(blocks, m.hooks(), 2, "linear", cache);
        QVERIFY(second.from_cache);
        QCOMPARE(m.forward_calls + m.input_calls, calls);
        QCOMPARE(second.errors, first.errors);  // bit for bit through the JSON round trip
        QCOMPARE(second.fingerprint, first.fingerprint);
        QCOMPARE(second.cache_path, first.cache_path);
    }

    void cache_misses() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string cache = dir.path().toStdString();
        SumBlock sb;
        sb.blocks = {tensor_block("blocks.0", {torch::randn({4, 8})})};
        bool consistent = true;  // from_cache exactly when no forward pass ran
        const auto run = [&](const std::string& identity, int samples) {
            const int before = sb.forward_calls;
            CalibrationResult r = calibrate(sb.blocks, sb.hooks(), samples, identity, cache);
            consistent = consistent && r.from_cache == (sb.forward_calls == before);
            return r;
        };
        QVERIFY(!run("m", 2).from_cache);
        QVERIFY(run("m", 2).from_cache);
        QVERIFY(!run("m2", 2).from_cache);  // model identity
        QVERIFY(!run("m", 3).from_cache);   // samples
        sb.blocks[0].params[0] = torch::randn({8, 4});
        QVERIFY(!run("m", 2).from_cache);  // shape
        sb.blocks[0].params[0] = torch::randn({8, 4}, torch::kDouble);
        QVERIFY(!run("m", 2).from_cache);  // dtype
        sb.blocks[0].name = "blocks.x";
        QVERIFY(!run("m", 2).from_cache);  // block name
        QVERIFY(run("m", 2).from_cache);
        QVERIFY(consistent);
        // Every configuration kept its own file.
        QCOMPARE(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), std::ptrdiff_t{6});
    }

    void corrupt_or_mismatched_cache_is_recomputed() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string cache = dir.path().toStdString();
        LinearModel m(2);
        const auto blocks = m.blocks();
        const CalibrationResult good = calibrate(blocks, m.hooks(), 2, "linear", cache);

        const auto rewrite = [&](const std::string& text) {
            std::ofstream(good.cache_path, std::ios::trunc) << text;
        };
        const auto recomputed = [&] {
            const int calls = m.forward_calls;
            const CalibrationResult r = calibrate(blocks, m.hooks(), 2, "linear", cache);
            return !r.from_cache && m.forward_calls > calls && r.errors == good.errors &&
                   r.cache_path == good.cache_path;
        };
        std::ifstream in(good.cache_path);
        nlohmann::json j = nlohmann::json::parse(in);

        rewrite("{\"fingerprint\": \"" + good.fingerprint + "\", \"errors\": {\"0\": 0.1,");  // truncated
        QVERIFY(recomputed());
        rewrite("");
        QVERIFY(recomputed());
        nlohmann::json wrong = j;
        wrong["fingerprint"] = "0000000000000000";
        rewrite(wrong.dump());
        QVERIFY(recomputed());
        wrong = j;
        wrong["errors"].erase("1");  // block count
        rewrite(wrong.dump());
        QVERIFY(recomputed());
        wrong = j;
        wrong["errors"]["0"] = -0.5;
        rewrite(wrong.dump());
        QVERIFY(recomputed());
        wrong = j;
        wrong["errors"]["1"] = "0.1";
        rewrite(wrong.dump());
        QVERIFY(recomputed());
        wrong = j;
        wrong["samples"] = 7;
        rewrite(wrong.dump());
        QVERIFY(recomputed());
        // Overwritten with a good file: a hit again.
        const CalibrationResult hit = calibrate(blocks, m.hooks(), 2, "linear", cache);
        QVERIFY(hit.from_cache);
        QCOMPARE(hit.errors, good.errors);
    }

    void empty_or_unusable_cache_dir() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        EnvGuard xdg("XDG_CACHE_HOME");
        qputenv("XDG_CACHE_HOME", dir.path().toLocal8Bit());
        LinearModel m(1);
        const CalibrationResult r = calibrate(m.blocks(), m.hooks(), 1, "linear", "");
        QVERIFY(r.cache_path.empty());
        QVERIFY(!r.from_cache);
        QVERIFY(fs::is_empty(dir.path().toStdString()));  // not even the default folder

        // A folder that cannot be created (below a regular file): computed, not cached, no throw.
        const fs::path file = fs::path(dir.path().toStdString()) / "file";
        std::ofstream(file) << "x";
        const CalibrationResult u = calibrate(m.blocks(), m.hooks(), 1, "linear", (file / "sub").string());
        QVERIFY(u.cache_path.empty());
        QVERIFY(!u.from_cache);
        QCOMPARE(u.errors, r.errors);
    }

    void throwing_hook_restores_weights() {
        LinearModel m(2);
        const auto blocks = m.blocks();
        const auto before = snapshot(blocks);
        for (const int fail_at : {1, 2, 3}) {  // BF16 pass, INT8 pass, a later sample
            CalibrationHooks h = m.hooks();
            int calls = 0;
            const auto forward = h.forward;
            h.forward = [&](int b, const torch::Tensor& x) {
                if (b == 1 && ++calls == fail_at) throw std::out_of_range("boom " + std::to_string(fail_at));
                return forward(b, x);
            };
            try {
                calibrate(blocks, h, 2, "linear", "");
                QFAIL("no exception");
            } catch (const std::runtime_error& e) {
                const std::string what = e.what();
                QVERIFY2(what.find("blocks.1") != std::string::npos, e.what());
                QVERIFY2(what.find("boom " + std::to_string(fail_at)) != std::string::npos, e.what());
            }
            QVERIFY(unchanged(blocks, before));
        }
        // A failing input hook, and a torch error (shape mismatch) inside the forward pass.
        CalibrationHooks h = m.hooks();
        h.input = [](int, int) -> torch::Tensor { throw std::runtime_error("no data"); };
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, calibrate(blocks, h, 1, "linear", ""));
        h = m.hooks();
        h.input = [](int, int) { return torch::randn({2, 3}); };
        try {
            calibrate(blocks, h, 1, "linear", "");
            QFAIL("no exception");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("blocks.0") != std::string::npos, e.what());
        }
        QVERIFY(unchanged(blocks, before));
    }

    void invalid_arguments() {
        LinearModel m(1);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, calibrate(m.blocks(), m.hooks(), 0, "x", ""));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 calibrate(m.blocks(), CalibrationHooks{}, 1, "x", ""));
        const CalibrationResult none = calibrate({}, m.hooks(), 1, "x", "");
        QVERIFY(none.errors.empty());
    }

    void default_cache_dir() {
        EnvGuard xdg("XDG_CACHE_HOME");
        EnvGuard home("HOME");
        qputenv("XDG_CACHE_HOME", "/tmp/xdg-test");
        QCOMPARE(sp::agent::default_calibration_cache_dir(),
                 std::string("/tmp/xdg-test/selective-precision"));
        qputenv("HOME", "/home/someone");
        qputenv("XDG_CACHE_HOME", "relative/ignored");
        QCOMPARE(sp::agent::default_calibration_cache_dir(),
                 std::string("/home/someone/.cache/selective-precision"));
        qunsetenv("XDG_CACHE_HOME");
        QCOMPARE(sp::agent::default_calibration_cache_dir(),
                 std::string("/home/someone/.cache/selective-precision"));
        qunsetenv("HOME");
        QCOMPARE(sp::agent::default_calibration_cache_dir(), std::string("./.selective-precision-cache"));
    }
};

QTEST_APPLESS_MAIN(TestCalibration)
#include "test_calibration.moc"
