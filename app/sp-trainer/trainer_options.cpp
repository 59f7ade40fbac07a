#include "trainer_options.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <system_error>
#include <type_traits>

#include "sp/format_gate.h"
#include "sp/protocol.h"
#include "sp/transport/server_options.h"

namespace sp::trainer {
namespace {

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

std::string non_empty(const std::string& flag, const std::string& value) {
    if (value.empty()) throw UsageError(flag + ": the value is empty");
    return value;
}

// A whole-string integer in [lo, hi]; "12abc", "", "1e3" and out-of-range values are rejected.
template <typename Int>
Int parse_int(const std::string& flag, const std::string& text, Int lo, Int hi) {
    Int value{};
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    const bool negative_unsigned = std::is_unsigned_v<Int> && !text.empty() && text[0] == '-';
    if (negative_unsigned || ec == std::errc::result_out_of_range ||
        (ec == std::errc() && ptr == end && (value < lo || value > hi)))
        throw UsageError(flag + ": " + quoted(text) + " is out of range (" + std::to_string(lo) + " .. " +
                         std::to_string(hi) + ")");
    if (ec != std::errc() || ptr != end)
        throw UsageError(flag + ": expected an integer, got " + quoted(text));
    return value;
}

// A whole-string finite number in (0, hi].
double parse_positive_double(const std::string& flag, const std::string& text, double hi) {
    double value = 0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc::invalid_argument || ptr != end)
        throw UsageError(flag + ": expected a number, got " + quoted(text));
    if (ec != std::errc() || !std::isfinite(value) || value <= 0 || value > hi) {
        std::ostringstream range;
        range << "(0, " << hi << "]";
        throw UsageError(flag + ": " + quoted(text) + " is out of range " + range.str());
    }
    return value;
}

// A uniform --precision overrides the config's routing; ids in the config's force lists must exist
// in this model for --precision policy.
void apply_flags_to_config(TrainerOptions& o) {
    Config& c = o.config;
    if (o.telemetry_path) {
        c.telemetry_enabled = true;
        c.telemetry_file = *o.telemetry_path;
    }
    if (o.no_telemetry) c.telemetry_enabled = false;
    if (o.every_step_stats) c.telemetry_every_step = true;
    if (!o.precision.uniform) {
        for (Precision p : kAllPrecisions)
            for (int id : c.force_list(p))
                if (id >= o.blocks)
                    throw UsageError("--config: " + Config::force_key(p) + " names block " +
                                     std::to_string(id) + ", but the model has " + std::to_string(o.blocks) +
                                     " blocks (--blocks)");
    } else {
        // Force lists hold in every mode (POLICY.md rule 9): clear them so that only the chosen one holds.
        for (Precision p : kAllPrecisions) c.force_list(p).clear();
        c.enabled = true;
        c.mode = *o.precision.uniform == Precision::bf16 ? Mode::off : Mode::static_;
        if (c.mode == Mode::static_)
            for (int i = 0; i < o.blocks; ++i) c.force_list(*o.precision.uniform).push_back(i);
    }
    if (const auto problems = validate(c); !problems.empty()) {
        std::string message = "the effective Selective Precision config is invalid:";
        for (const auto& p : problems) message += "\n  " + p;
        throw UsageError(message);
    }
}

void validate_text(const TrainerOptions& o) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto status = fs::status(o.text_path, ec);
    if (ec || !fs::exists(status)) throw UsageError("--text: " + quoted(o.text_path) + " does not exist");
    if (!fs::is_regular_file(status))
        throw UsageError("--text: " + quoted(o.text_path) + " is not a regular file");
    const auto size = fs::file_size(o.text_path, ec);
    // 20 windows: the held-out 10% then still holds two windows, enough for distinct eval batches.
    const std::uintmax_t needed = std::uintmax_t(o.seq_len) * 20;
    const std::uintmax_t part = part_size(o.text_part, ec ? 0 : size);
    if (part < needed)
        throw UsageError("--text: " + quoted(o.text_path) +
                         (o.text_part == TextPart::all
                              ? ""
                              : " (--text-part " + std::string(to_string(o.text_part)) + ")") +
                         " holds " + std::to_string(part) + " bytes; --seq-len " + std::to_string(o.seq_len) +
                         " needs at least " + std::to_string(needed));
}

// A checkpoint to start from must be a readable regular file (a FIFO would hang the load); one to
// write needs its folder. Whether the file is a checkpoint of this shape is found when loading it.
void validate_checkpoint_paths(const TrainerOptions& o) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!o.init_checkpoint.empty()) {
        const auto status = fs::status(o.init_checkpoint, ec);
        if (ec || !fs::exists(status))
            throw UsageError("--init-checkpoint: " + quoted(o.init_checkpoint) + " does not exist");
        if (!fs::is_regular_file(status))
            throw UsageError("--init-checkpoint: " + quoted(o.init_checkpoint) + " is not a regular file");
    }
    if (!o.save_checkpoint.empty()) {
        const fs::path file(o.save_checkpoint);
        if (fs::is_directory(file, ec))
            throw UsageError("--save-checkpoint: " + quoted(o.save_checkpoint) + " is a directory");
        const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
        if (!fs::is_directory(folder, ec))
            throw UsageError("--save-checkpoint: the folder " + quoted(folder.string()) + " does not exist");
    }
}

// A file the trainer writes (the telemetry, the probe results) is opened later; a bad path is a bad
// value, found here. A symlink is refused (the agent opens telemetry with O_NOFOLLOW anyway, and says
// less), and so is a FIFO, socket or block device: opening a FIFO for writing waits for a reader,
// so sp-trainer would hang silently. A character device (/dev/null, /dev/full) is taken as given.
// `what` names the file in the symlink message.
void validate_output_path(const std::string& source, const std::string& path, const std::string& what) {
    namespace fs = std::filesystem;
    const fs::path file(path);
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(file, ec);
    if (fs::is_symlink(status))
        throw UsageError(source + ": " + quoted(path) + " is a symbolic link; " + what +
                         " is never written through one (give the file itself, or a new name)");
    if (fs::is_directory(status)) throw UsageError(source + ": " + quoted(path) + " is a directory");
    if (fs::is_fifo(status) || fs::is_socket(status) || fs::is_block_file(status))
        throw UsageError(source + ": " + quoted(path) + " is not a regular file (" +
                         (fs::is_fifo(status)     ? "a FIFO"
                          : fs::is_socket(status) ? "a socket"
                                                  : "a block device") +
                         ")");
    const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, ec))
        throw UsageError(source + ": the folder " + quoted(folder.string()) + " does not exist");
}

void validate_telemetry_path(const TrainerOptions& o) {
    if (!o.config.telemetry_enabled) return;
    validate_output_path(o.telemetry_path ? "--telemetry" : "--config: telemetry_file",
                         o.config.telemetry_file, "telemetry");
}

// The maps to probe are read whole before training: a regular file of bounded size.
void validate_probe_paths(const TrainerOptions& o) {
    namespace fs = std::filesystem;
    if (o.probe_maps.empty()) return;
    std::error_code ec;
    const fs::file_status status = fs::status(o.probe_maps, ec);
    if (ec || !fs::exists(status))
        throw UsageError("--probe-maps: " + quoted(o.probe_maps) + " does not exist");
    if (!fs::is_regular_file(status))
        throw UsageError("--probe-maps: " + quoted(o.probe_maps) + " is not a regular file");
    if (fs::file_size(o.probe_maps, ec) > TrainerOptions::kMaxProbeMapsBytes)
        throw UsageError("--probe-maps: " + quoted(o.probe_maps) + " is larger than " +
                         std::to_string(TrainerOptions::kMaxProbeMapsBytes >> 20) + " MiB");
    validate_output_path("--probe-out", o.probe_out, "a probe result");
}

// Key files are read when the agent starts; one that is not a regular file (a FIFO would block
// the read until a writer comes) is refused here, in the words of the key reader (sp/keys).
void validate_key_file(const std::string& flag, const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);  // a symlink to a key file is fine
    if (!ec && !fs::is_regular_file(status))
        throw UsageError(flag + ": cannot read CURVE " +
                         (flag == "--allowed-clients" ? "allow-list" : "key file") + " " + quoted(path) +
                         ": not a regular file");
}

// The gate file is read when the agent registers the blocks, after the telemetry file is created;
// read here first, a bad one is a bad config value (exit 2, nothing written).
void validate_gate_file(const TrainerOptions& o) {
    if (o.config.format_gate_file.empty()) return;
    try {
        (void)load_gate_policy(o.config.format_gate_file);
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--config: format_gate_file: ") + e.what());
    }
}

// "run.jsonl" -> "run.rank1.jsonl"; a name without the extension gets ".rank1" at its end.
std::string rank_file_name(const std::string& file, int rank) {
    const std::string tag = ".rank" + std::to_string(rank);
    const std::string ext = ".jsonl";
    if (file.size() > ext.size() && file.compare(file.size() - ext.size(), ext.size(), ext) == 0)
        return file.substr(0, file.size() - ext.size()) + tag + ext;
    return file + tag;
}

// A data-parallel rank: its own endpoints (base + 2·rank) and telemetry file; a launcher (--spawn)
// only checks what its ranks will check again.
void apply_data_parallel(TrainerOptions& o) {
    o.leader_control_endpoint = o.control_endpoint;
    if (o.spawn > 0) {
        if (o.world_size != 1 || o.rank != 0)
            throw UsageError("--spawn N starts ranks 0..N-1 itself: drop --world-size and --rank");
        return;
    }
    if (o.rank >= o.world_size)
        throw UsageError("--rank " + std::to_string(o.rank) + " is not below --world-size " +
                         std::to_string(o.world_size));
    if (o.world_size == 1) return;
    if (o.device != "cpu")
        throw UsageError(
            "--world-size: data-parallel sp-trainer runs on the CPU with Gloo (--device cpu); "
            "the NCCL path is unverified (agent/PROTOCOL.md §11)");
    try {
        o.telemetry_endpoint = protocol::rank_endpoint(o.telemetry_endpoint, o.rank);
        o.control_endpoint = protocol::rank_endpoint(o.control_endpoint, o.rank);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--rank: ") + e.what());
    }
    if (o.config.telemetry_enabled) o.config.telemetry_file = rank_file_name(o.config.telemetry_file, o.rank);
}

using ValueHandler = std::function<void(const std::string& flag, const std::string& value)>;

// The flags that take a value, each storing it into `o` after checking it.
std::map<std::string, ValueHandler> value_flags(TrainerOptions& o) {
    return {
        // 0: evaluate (a checkpoint, under any --precision or config) and exit.
        {"--steps", [&](auto& f, auto& v) { o.steps = parse_int<std::int64_t>(f, v, 0, 1'000'000'000); }},
        {"--blocks", [&](auto& f, auto& v) { o.blocks = parse_int<int>(f, v, 1, 1024); }},
        {"--d-model", [&](auto& f, auto& v) { o.d_model = parse_int<int>(f, v, 1, 65536); }},
        {"--heads", [&](auto& f, auto& v) { o.heads = parse_int<int>(f, v, 1, 4096); }},
        {"--seq-len", [&](auto& f, auto& v) { o.seq_len = parse_int<int>(f, v, 1, 1 << 20); }},
        {"--batch", [&](auto& f, auto& v) { o.batch = parse_int<int>(f, v, 1, 1 << 20); }},
        {"--lr", [&](auto& f, auto& v) { o.lr = parse_positive_double(f, v, 1.0); }},
        {"--config", [&](auto&, auto& v) { o.config_path = v; }},
        {"--telemetry",
         [&](auto& f, auto& v) {
             if (v.empty()) throw UsageError(f + ": the file name is empty");
             o.telemetry_path = v;
         }},
        {"--seed", [&](auto& f, auto& v) { o.seed = parse_int<std::uint64_t>(f, v, 0, UINT64_MAX); }},
        {"--eval-every",
         [&](auto& f, auto& v) { o.eval_every = parse_int<std::int64_t>(f, v, 1, 1'000'000'000); }},
        {"--eval-batches", [&](auto& f, auto& v) { o.eval_batches = parse_int<int>(f, v, 1, 100'000); }},
        {"--device",
         [&](auto& f, auto& v) {
             if (v != "cpu" && v != "cuda") throw UsageError(f + ": expected cpu or cuda, got " + quoted(v));
             o.device = v;
         }},
        {"--precision",
         [&](auto& f, auto& v) {
             if (v == "policy") {
                 o.precision.uniform.reset();
             } else if (const auto p = parse_precision(v)) {
                 o.precision.uniform = *p;
             } else {
                 throw UsageError(f + ": expected policy, bf16, int8, int4, fp8_e4m3 or fp8_e5m2, got " +
                                  quoted(v));
             }
         }},
        {"--text", [&](auto&, auto& v) { o.text_path = v; }},
        {"--text-part",
         [&](auto& f, auto& v) {
             if (v != "all" && v != "pretrain" && v != "finetune")
                 throw UsageError(f + ": expected all, pretrain or finetune, got " + quoted(v));
             o.text_part = v == "all"        ? TextPart::all
                           : v == "pretrain" ? TextPart::pretrain
                                             : TextPart::finetune;
         }},
        {"--probe-maps", [&](auto& f, auto& v) { o.probe_maps = non_empty(f, v); }},
        {"--probe-out", [&](auto& f, auto& v) { o.probe_out = non_empty(f, v); }},
        {"--telemetry-endpoint", [&](auto& f, auto& v) { o.telemetry_endpoint = non_empty(f, v); }},
        {"--control-endpoint", [&](auto& f, auto& v) { o.control_endpoint = non_empty(f, v); }},
        {"--server-key", [&](auto& f, auto& v) { o.server_key = non_empty(f, v); }},
        {"--allowed-clients", [&](auto& f, auto& v) { o.allowed_clients = non_empty(f, v); }},
        {"--threads", [&](auto& f, auto& v) { o.threads = parse_int<int>(f, v, 1, 1024); }},
        {"--world-size", [&](auto& f, auto& v) { o.world_size = parse_int<int>(f, v, 1, 1024); }},
        {"--rank", [&](auto& f, auto& v) { o.rank = parse_int<int>(f, v, 0, 1023); }},
        {"--master-addr", [&](auto& f, auto& v) { o.master_addr = non_empty(f, v); }},
        {"--master-port",
         [&](auto& f, auto& v) {
             o.master_port = parse_int<int>(f, v, 1, 65535);
             o.master_port_given = true;
         }},
        {"--spawn", [&](auto& f, auto& v) { o.spawn = parse_int<int>(f, v, 1, 64); }},
        {"--harsh-block", [&](auto& f, auto& v) { o.harsh_block = parse_int<int>(f, v, 0, 1023); }},
        {"--harsh-step", [&](auto& f, auto& v) { o.harsh_step = parse_positive_double(f, v, 1e6); }},
        {"--outlier-block", [&](auto& f, auto& v) { o.outlier_block = parse_int<int>(f, v, 0, 1023); }},
        {"--outlier-scale", [&](auto& f, auto& v) { o.outlier_scale = parse_positive_double(f, v, 1e6); }},
        {"--snr-validation", [&](auto& f, auto& v) { o.snr_validation = non_empty(f, v); }},
        {"--finetune-mode",
         [&](auto& f, auto& v) {
             if (v != "full" && v != "adapters")
                 throw UsageError(f + ": expected full or adapters, got " + quoted(v));
             o.adapters = v == "adapters";
         }},
        {"--weight-residency",
         [&](auto& f, auto& v) {
             if (v != "streamed" && v != "resident")
                 throw UsageError(f + ": expected streamed or resident, got " + quoted(v));
             o.resident = v == "resident";
         }},
        {"--adapter-rank",
         [&](auto& f, auto& v) {
             o.adapter_rank = parse_int<int>(f, v, 1, 4096);
             o.adapter_rank_given = true;
         }},
        {"--save-checkpoint", [&](auto& f, auto& v) { o.save_checkpoint = non_empty(f, v); }},
        {"--init-checkpoint", [&](auto& f, auto& v) { o.init_checkpoint = non_empty(f, v); }},
        {"--summary-json",
         [&](auto& f, auto& v) {
             if (v.empty()) throw UsageError(f + ": the file name is empty");
             o.summary_json = v;
         }},
    };
}

// A build without the transport (SP_BUILD_TRANSPORT=OFF) binds nothing: --no-network is implied
// (main says so at start-up), and a flag that asks for the network is refused rather than ignored.
void apply_transport_availability(TrainerOptions& o) {
    if (transport::transport_available() || o.no_network) return;
    const TrainerOptions defaults;
    const char* asked = o.telemetry_endpoint != defaults.telemetry_endpoint ? "--telemetry-endpoint"
                        : o.control_endpoint != defaults.control_endpoint   ? "--control-endpoint"
                        : !o.server_key.empty()                             ? "--server-key"
                        : !o.allowed_clients.empty()                        ? "--allowed-clients"
                        : o.insecure                                        ? "--insecure"
                                                                            : nullptr;
    if (asked)
        throw UsageError(std::string(asked) +
                         ": this sp-trainer was built without the network transport "
                         "(SP_BUILD_TRANSPORT=OFF); it writes file telemetry only (--telemetry FILE)");
    o.no_network = true;
    o.network_unavailable = true;
}

// What no single flag can check: combinations, the files named and the effective config.
void check_options(TrainerOptions& o) {
    apply_transport_availability(o);
    if (o.d_model % o.heads != 0)
        throw UsageError("--d-model " + std::to_string(o.d_model) + " is not divisible by --heads " +
                         std::to_string(o.heads));
    if (o.harsh_block && *o.harsh_block >= o.blocks)
        throw UsageError("--harsh-block: block " + std::to_string(*o.harsh_block) +
                         " does not exist (--blocks " + std::to_string(o.blocks) + ")");
    if (o.outlier_block && *o.outlier_block >= o.blocks)
        throw UsageError("--outlier-block: block " + std::to_string(*o.outlier_block) +
                         " does not exist (--blocks " + std::to_string(o.blocks) + ")");
    if (!o.server_key.empty() && o.allowed_clients.empty())
        throw UsageError("--server-key needs --allowed-clients (the public keys of the clients to let in)");
    // Silently ignoring it would leave the operator believing only the listed clients get in.
    if (!o.allowed_clients.empty() && o.server_key.empty())
        throw UsageError(
            "--allowed-clients needs --server-key: without the agent's secret key there is no "
            "CURVE, so nothing would check the allow-list and every client would get in");
    if (o.telemetry_path && o.no_telemetry)
        throw UsageError("--telemetry and --no-telemetry contradict each other");
    if (o.device == "cuda" && !torch::cuda::is_available())
        throw UsageError("--device cuda: no CUDA device available (this LibTorch build: " +
                         std::string(at::hasCUDA() ? "built with CUDA, but no device found" : "CPU only") +
                         ")");
    if (o.adapter_rank_given && !o.adapters)
        throw UsageError("--adapter-rank needs --finetune-mode adapters (a full fine-tune has no adapters)");
    if (o.probe_maps.empty() != o.probe_out.empty())
        throw UsageError(o.probe_maps.empty() ? "--probe-out needs --probe-maps (the maps to probe)"
                                              : "--probe-maps needs --probe-out (where the results go)");
    if (!o.probe_maps.empty() && (o.world_size > 1 || o.spawn > 0))
        throw UsageError("--probe-maps runs in a single process (no --world-size or --spawn)");
    validate_text(o);
    validate_checkpoint_paths(o);
    if (!o.config_path.empty()) {
        try {
            o.config = load_config_file(o.config_path);
        } catch (const ConfigError& e) {
            throw UsageError(std::string("--config: ") + e.what());
        }
    }
    apply_flags_to_config(o);
    apply_data_parallel(o);
    validate_telemetry_path(o);
    validate_probe_paths(o);
    if (!o.no_network && !o.server_key.empty()) validate_key_file("--server-key", o.server_key);
    if (!o.no_network && !o.allowed_clients.empty())
        validate_key_file("--allowed-clients", o.allowed_clients);
    validate_gate_file(o);
}

}  // namespace

std::string_view to_string(PrecisionChoice p) {
    return p.uniform ? to_string(*p.uniform) : std::string_view("policy");
}

std::string usage_text(const std::string& program) {
    const TrainerOptions d;  // the defaults, so the text cannot drift from the code
    std::ostringstream u;
    u << "Usage: " << program << " [options]\n"
      << "Trains a small byte-level GPT on a text file while Selective Precision routes its transformer\n"
         "blocks to BF16, INT8, FP8 (E4M3, E5M2) or INT4 from their gradient statistics and the SNR\n"
         "of each format.\n\n"
         "Model and training:\n"
      << "  --steps N            training steps (default " << d.steps << "; 0: evaluate and exit)\n"
      << "  --blocks N           transformer blocks, the units the agent routes (default " << d.blocks
      << ")\n"
      << "  --d-model N          model width, divisible by --heads (default " << d.d_model << ")\n"
      << "  --heads N            attention heads (default " << d.heads << ")\n"
      << "  --seq-len N          tokens (bytes) per sequence (default " << d.seq_len << ")\n"
      << "  --batch N            sequences per step (default " << d.batch << ")\n"
      << "  --lr X               peak AdamW learning rate (default " << d.lr
      << "; warm-up, then cosine decay to lr/10)\n"
      << "  --seed S             initial weights, batches and calibration inputs (default " << d.seed << ")\n"
      << "  --eval-every N       held-out loss every N steps (default " << d.eval_every << ")\n"
      << "  --eval-batches N     held-out batches per evaluation (default " << d.eval_batches << ")\n"
      << "  --text FILE          training text, >= 20 * seq-len bytes (default: the bundled KJV Torah)\n"
         "  --text-part P        all (default) | pretrain (the text's first 60%) | finetune (the rest);\n"
         "                       the last 10% of the part is held out for evaluation\n"
         "  --device cpu|cuda    where to train (default cpu)\n"
         "  --init-checkpoint FILE  start from a checkpoint's weights and optimizer state (the shape\n"
         "                       flags must match it, else exit 2)\n"
         "  --save-checkpoint FILE  write the model and optimizer state at the end (LibTorch archive)\n"
         "  --finetune-mode M    full (default: every parameter trains, re-quantized from fp32 masters\n"
         "                       every step) | adapters (the base is frozen and stored in each block's\n"
         "                       format; low-rank adapters on the blocks' linear layers train in fp32)\n"
         "  --adapter-rank R     the adapters' rank (default 8; with --finetune-mode adapters)\n"
         "  --weight-residency R streamed (default: every block's payload is sent to the compute copy\n"
         "                       after every optimizer step, as for weights streamed over PCIe) |\n"
         "                       resident (only blocks whose values or format changed)\n"
         "  --threads N          CPU threads for the matrix products (default: the cores); with OpenBLAS\n"
         "                       they are OpenBLAS's and LibTorch's own pool gets one\n"
         "Selective Precision:\n"
         "  --config CFG.json    policy configuration (core/CONFIG.md); default: built-in defaults\n"
         "  --precision P        policy (route per the config; default) | bf16 | int8 | int4 | fp8_e4m3 |\n"
         "                       fp8_e5m2 (every block in that format); the agent collects statistics\n"
         "                       in every case\n"
         "  --telemetry FILE     write telemetry JSONL to FILE (overrides the config; turns it on)\n"
         "  --no-telemetry       write no telemetry\n"
         "  --every-step-stats   also write per-step block statistics (input for `sp-ctl simulate`)\n"
         "Live telemetry and control (agent/PROTOCOL.md; sp-ctl and sp-dashboard connect here):\n"
         "  --telemetry-endpoint E  PUB socket (default tcp://127.0.0.1:5556)\n"
         "  --control-endpoint E    ROUTER socket for commands (default tcp://127.0.0.1:5557)\n"
         "  --server-key FILE.key   CURVE secret key (sp-ctl keygen; mode 0600); required for\n"
         "                          non-loopback binds\n"
         "  --allowed-clients FILE  CURVE public keys of the clients allowed in, one per line (needs\n"
         "                          --server-key)\n"
         "  --insecure              allow a non-loopback bind without CURVE (a warning is logged)\n"
         "  --no-network            bind no sockets\n"
         "Data-parallel training (c10d with Gloo; agent/PROTOCOL.md section 11):\n"
         "  --world-size N          ranks in the job (default 1: no process group)\n"
         "  --rank R                this process's rank, 0..N-1; rank 0 decides and takes commands,\n"
         "                          rank R's endpoints are the ones above with the port + 2*R, and its\n"
         "                          telemetry file is NAME.rankR.jsonl\n"
         "  --master-addr A         where rank 0 hosts the rendezvous (default 127.0.0.1)\n"
         "  --master-port P         its port (default 29500; with --spawn a free one)\n"
         "  --spawn N               start ranks 0..N-1 of this command line on this machine, each\n"
         "                          rank's output prefixed with [rank R]; exits with the first\n"
         "                          failing rank's status\n"
         "  (config key distributed_stats_mode \"sharded\": each rank reads a 1/N slice of every\n"
         "  gradient and the statistics are all-gathered; process_group_timeout_s bounds every wait)\n"
         "Experiments (tools/experiment):\n"
         "  --harsh-block B      a planted fault: block B's \"INT8\" is stochastic ternary rounding onto a\n"
         "                       grid of K times each row's absmax (K = --harsh-step); BF16 is unaffected\n"
         "  --harsh-step K       that grid's step in row absmaxes (default 16)\n"
         "  --outlier-block B    outlier features in block B: a function-preserving reparameterization\n"
         "                       that scales 4 value channels down by S and the matching input columns\n"
         "                       of the attention output projection up by S (same BF16 function; per-row\n"
         "                       INT8/INT4 lose the small columns, FP8 keeps them); the optimizer steps\n"
         "                       the unplanted weights, so the plant lasts the whole run\n"
         "  --outlier-scale S    that factor (default 64; a power of two keeps BF16 bit-identical)\n"
         "  --snr-validation F   at each distribution-statistics step, write every linear layer's SNR\n"
         "                       estimates next to the truth (output SNR over the batch) to F (JSONL),\n"
         "                       and print their agreement after the summary\n"
         "  --summary-json FILE  write the run's summary and eval-loss curve as JSON\n"
         "  --probe-maps FILE    JSONL of {\"step\": S, \"name\": N, \"map\": [format per block]}: after S\n"
         "                       updates, each map's held-out loss and gradient against all-BF16's, on\n"
         "                       the same weights and batches (training continues unchanged)\n"
         "  --probe-out FILE     where the probes' results go (JSONL; with --probe-maps)\n"
         "Output:\n"
         "  --quiet              no progress lines, only the summary\n"
         "  --help               this text\n\n"
         "Without --telemetry or --no-telemetry the config decides; the default config writes\n"
         "selective_precision_telemetry.jsonl in the current directory.\n"
         "Exit status: 0 done, 1 failed while running, 2 bad flag, value or config (nothing written).\n\n"
      << "Example: " << program << " --steps 300 --telemetry run.jsonl\n";
    return u.str();
}

std::string bundled_text_path() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path installed =
            exe.parent_path().parent_path() / "share/selective-precision/kjv_torah.txt";
        if (fs::is_regular_file(installed, ec)) return installed.string();
    }
    return SP_SOURCE_TEXT;
}

TrainerOptions parse_trainer_options(const std::vector<std::string>& args, const std::string& default_text) {
    TrainerOptions o;
    o.text_path = default_text;
    const std::map<std::string, ValueHandler> with_value = value_flags(o);
    const std::map<std::string, bool*> switches = {
        {"--no-telemetry", &o.no_telemetry},
        {"--every-step-stats", &o.every_step_stats},
        {"--quiet", &o.quiet},
        {"--no-network", &o.no_network},
        {"--insecure", &o.insecure},
        {"--help", &o.help},
        {"-h", &o.help},
    };

    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const auto eq = arg.find('=');
        const std::string flag = arg.rfind("--", 0) == 0 ? arg.substr(0, eq) : arg;
        if (auto it = switches.find(flag); it != switches.end()) {
            if (flag != arg) throw UsageError(flag + " takes no value");
            *it->second = true;
        } else if (auto handler = with_value.find(flag); handler != with_value.end()) {
            std::string value;
            if (eq != std::string::npos && flag != arg) {
                value = arg.substr(eq + 1);
            } else if (i + 1 < args.size()) {
                value = args[++i];
            } else {
                throw UsageError(flag + " needs a value");
            }
            handler->second(flag, value);
        } else if (!arg.empty() && arg.front() == '-') {
            throw UsageError("unknown flag " + quoted(flag));
        } else {
            throw UsageError("unexpected argument " + quoted(arg) + " (sp-trainer takes flags only)");
        }
    }
    if (o.help) return o;
    check_options(o);
    return o;
}

}  // namespace sp::trainer
