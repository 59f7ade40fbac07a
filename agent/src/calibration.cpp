#include "sp/agent/calibration.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "materialize.h"
#include "sp/json_input.h"

namespace sp::agent {

namespace fs = std::filesystem;

namespace {

// Bump kFormatTag whenever the meaning of a cached error changes (the error formula, the sample
// protocol); bump kSchemeTag when the BF16 or INT8 materialization changes. Both go into the
// fingerprint, so an old cache file is simply never looked up again.
constexpr std::string_view kFormatTag = "sp-calibration-v1";
constexpr std::string_view kSchemeTag = "bf16-rne+int8-per-row-absmax-v1";

// 64-bit FNV-1a over an unambiguous byte stream: every string is length-prefixed and every number
// is written as 8 little-endian bytes, so ("ab","c") and ("a","bc") differ and the value does not
// depend on the host's endianness or type sizes.
class Fnv1a {
  public:
    void bytes(const void* data, std::size_t n) {
        const auto* p = static_cast<const unsigned char*>(data);
        for (std::size_t i = 0; i < n; ++i) {
            hash_ ^= p[i];
            hash_ *= 0x100000001b3ULL;
        }
    }
    void u64(std::uint64_t v) {
        unsigned char b[8];
        for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
        bytes(b, sizeof b);
    }
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    void str(std::string_view s) {
        u64(s.size());
        bytes(s.data(), s.size());
    }
    std::string hex() const {
        char out[17];
        std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash_));
        return out;
    }

  private:
    std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::string message_of(const std::exception& e) {
    // c10::Error::what() carries a multi-line C++ backtrace; the short form reads better in a log.
    if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
    return e.what();
}

// The errors of a cache file, or nothing when it is absent, unreadable, malformed or describes
// another configuration. Never throws: a bad cache only costs a recomputation.
std::optional<std::vector<double>> load_cache(const fs::path& file, const std::string& fingerprint,
                                              const std::string& model_identity, int samples,
                                              std::size_t blocks) {
    try {
        std::ifstream in(file, std::ios::binary);
        if (!in) return std::nullopt;
        const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        nlohmann::json j;
        sp::JsonError bad;
        if (!sp::parse_json(text, j, bad) || !j.is_object()) return std::nullopt;
        const auto fp = j.find("fingerprint");
        const auto id = j.find("model_identity");
        const auto n = j.find("samples");
        const auto errors = j.find("errors");
        if (fp == j.end() || !fp->is_string() || fp->get<std::string>() != fingerprint) return std::nullopt;
        // The fingerprint already covers these; checking them guards against a hash collision.
        if (id == j.end() || !id->is_string() || id->get<std::string>() != model_identity)
            return std::nullopt;
        if (n == j.end() || !n->is_number_integer() || n->get<std::int64_t>() != samples) return std::nullopt;
        if (errors == j.end() || !errors->is_object() || errors->size() != blocks) return std::nullopt;
        std::vector<double> out(blocks);
        for (std::size_t b = 0; b < blocks; ++b) {
            const auto e = errors->find(std::to_string(b));
            if (e == errors->end() || !e->is_number()) return std::nullopt;
            out[b] = e->get<double>();
            if (!std::isfinite(out[b]) || out[b] < 0.0) return std::nullopt;
        }
        return out;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Writes the cache atomically (a temporary file in the same folder, then a rename, so a reader
// never sees half a file and concurrent writers of the same configuration just race to the same
// content). Returns the file's path, or "" when the folder cannot be created or written.
std::string write_cache(const fs::path& dir, const fs::path& file, const CalibrationResult& result,
                        const std::string& model_identity, int samples) {
    fs::path tmp;
    try {
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) return "";
        nlohmann::ordered_json j;
        j["fingerprint"] = result.fingerprint;
        j["model_identity"] = model_identity;
        j["samples"] = samples;
        nlohmann::ordered_json errors = nlohmann::ordered_json::object();
        for (std::size_t b = 0; b < result.errors.size(); ++b) errors[std::to_string(b)] = result.errors[b];
        j["errors"] = std::move(errors);

        std::random_device rd;
        const auto salt = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
        tmp = file;
        tmp += ".tmp-" + std::to_string(salt);
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) return "";
            out << j.dump(2) << '\n';
            out.flush();
            if (!out) {
                out.close();
                fs::remove(tmp, ec);
                return "";
            }
        }
        fs::rename(tmp, file, ec);
        if (ec) {
            fs::remove(tmp, ec);
            return "";
        }
        return file.string();
    } catch (const std::exception&) {
        if (!tmp.empty()) {
            std::error_code ignored;
            fs::remove(tmp, ignored);
        }
        return "";
    }
}

void assign_all(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& values) {
    for (std::size_t k = 0; k < params.size(); ++k) detail::assign(params[k], values[k]);
}

// The mean relative output error of one block. Its parameters are left exactly as they were, also
// when a hook throws (then: std::runtime_error naming the block).
double calibrate_block(const AgentBlock& block, int id, const CalibrationHooks& hooks, int samples) {
    const std::vector<at::Tensor>& params = block.streamed();
    std::vector<at::Tensor> original;
    original.reserve(params.size());
    bool modified = false;
    const auto fail = [&](const std::string& what) -> std::runtime_error {
        if (modified) {
            try {
                assign_all(params, original);
            } catch (...) {
                // Restoring failed too (e.g. out of memory); the original error is the one to report.
            }
        }
        return std::runtime_error("calibration of block " + std::to_string(id) + " ('" + block.name +
                                  "') failed: " + what);
    };
    try {
        // The two materializations are computed once per block, not once per sample.
        std::vector<at::Tensor> as_bf16, as_int8;
        as_bf16.reserve(params.size());
        as_int8.reserve(params.size());
        for (std::size_t k = 0; k < params.size(); ++k) {
            const at::Tensor& p = params[k];
            const bool transposed = block.stored_transposed(k);  // scaled along its output channels
            original.push_back(p.detach().clone());
            as_bf16.push_back(detail::materialized_as_stored(p, transposed, Precision::bf16));
            as_int8.push_back(
                detail::materialized_as_stored(p, transposed, Precision::int8, block.harsh_int8_step));
        }
        double sum = 0.0;
        for (int s = 0; s < samples; ++s) {
            // The input hook may run this very block (e.g. a forward pass of the whole model that
            // captures the block's input): it must see the original weights.
            if (modified) assign_all(params, original);
            const at::Tensor x = hooks.input(id, s);
            modified = true;
            assign_all(params, as_bf16);
            if (hooks.compute_format) hooks.compute_format(id, Precision::bf16);
            at::Tensor out_bf16 = hooks.forward(id, x);
            if (!out_bf16.defined()) throw std::invalid_argument("the forward hook returned no tensor");
            // A copy: the output could alias the weights, which are about to change.
            out_bf16 = out_bf16.detach().clone();
            assign_all(params, as_int8);
            if (hooks.compute_format) hooks.compute_format(id, Precision::int8);
            const at::Tensor out_int8 = hooks.forward(id, x);
            if (!out_int8.defined()) throw std::invalid_argument("the forward hook returned no tensor");
            sum += relative_output_error(out_bf16, out_int8);
        }
        assign_all(params, original);
        return sum / samples;
    } catch (const std::exception& e) {
        throw fail(message_of(e));
    } catch (...) {
        throw fail("unknown exception");
    }
}

}  // namespace

std::string calibration_fingerprint(const std::string& model_identity, const std::vector<AgentBlock>& blocks,
                                    int samples) {
    // Parameter values are not hashed (model_identity stands for them: hashing every weight would
    // cost as much as a forward pass), and neither is the device.
    Fnv1a h;
    h.str(kFormatTag);
    h.str(model_identity);
    h.str(kSchemeTag);
    h.i64(samples);
    h.u64(blocks.size());
    for (const AgentBlock& b : blocks) {
        h.str(b.name);
        if (b.harsh_int8_step != 0.0)
            h.str("harsh " + std::to_string(b.harsh_int8_step));  // reference blocks hash as before
        // What calibration measures: the stored weights (the parameters, unless adapters train).
        const std::vector<at::Tensor>& tensors = b.streamed();
        const std::vector<std::string>& names = b.stored.empty() ? b.param_names : b.stored_names;
        h.u64(tensors.size());
        for (std::size_t k = 0; k < tensors.size(); ++k) {
            const at::Tensor& p = tensors[k];
            h.str(k < names.size() ? names[k] : std::string());
            if (!p.defined()) {
                h.i64(-1);  // no shape; distinct from every real rank
                continue;
            }
            h.i64(p.dim());
            for (const std::int64_t size : p.sizes()) h.i64(size);
            h.str(c10::toString(p.scalar_type()));
        }
    }
    return h.hex();
}

std::string default_calibration_cache_dir() {
    // XDG: a relative $XDG_CACHE_HOME is invalid and must be ignored.
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg != nullptr && *xdg != '\0' && fs::path(xdg).is_absolute())
        return (fs::path(xdg) / "selective-precision").string();
    const char* home = std::getenv("HOME");
    if (home != nullptr && *home != '\0') return (fs::path(home) / ".cache" / "selective-precision").string();
    return (fs::path(".") / ".selective-precision-cache").string();
}

double relative_output_error(const at::Tensor& out_bf16, const at::Tensor& out_int8) {
    if (!out_bf16.defined() || !out_int8.defined())
        throw std::invalid_argument("relative_output_error: undefined tensor");
    if (out_bf16.sizes() != out_int8.sizes())
        throw std::invalid_argument("relative_output_error: the outputs' shapes differ");
    at::NoGradGuard no_grad;
    const at::Tensor a = out_bf16.detach().to(at::kDouble).reshape(-1);
    const at::Tensor b = out_int8.detach().to(out_bf16.device(), at::kDouble).reshape(-1);
    // A non-finite output says nothing measurable about the quantization, only that this block
    // cannot be trusted: report the ceiling (1) rather than NaN/inf, which would poison the mean.
    if (!a.isfinite().all().item<bool>() || !b.isfinite().all().item<bool>()) return 1.0;
    const double norm_a = a.norm().item<double>();
    if (norm_a == 0.0) return b.ne(0.0).any().item<bool>() ? 1.0 : 0.0;
    const double ratio = a.sub(b).norm().item<double>() / norm_a;
    return std::isfinite(ratio) ? ratio : 1.0;  // overflow of a huge error: the ceiling as well
}

CalibrationResult calibrate(const std::vector<AgentBlock>& blocks, const CalibrationHooks& hooks, int samples,
                            const std::string& model_identity, const std::string& cache_dir) {
    if (samples < 1) throw std::invalid_argument("calibrate: samples must be >= 1");
    if (!hooks.input || !hooks.forward) throw std::invalid_argument("calibrate: both hooks must be set");

    CalibrationResult result;
    result.fingerprint = calibration_fingerprint(model_identity, blocks, samples);
    fs::path file;
    if (!cache_dir.empty()) {
        file = fs::path(cache_dir) / ("calibration-" + result.fingerprint + ".json");
        if (auto cached = load_cache(file, result.fingerprint, model_identity, samples, blocks.size())) {
            result.errors = std::move(*cached);
            result.cache_path = file.string();
            result.from_cache = true;
            return result;
        }
    }

    at::NoGradGuard no_grad;
    result.errors.reserve(blocks.size());
    // Block ids are dense 0..n-1 in registration order (AgentBlock::id), i.e. the position.
    for (std::size_t b = 0; b < blocks.size(); ++b)
        result.errors.push_back(calibrate_block(blocks[b], static_cast<int>(b), hooks, samples));

    if (!cache_dir.empty()) result.cache_path = write_cache(cache_dir, file, result, model_identity, samples);
    return result;
}

}  // namespace sp::agent
