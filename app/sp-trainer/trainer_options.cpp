// sp-trainer's checks of what no single flag can check: combinations, the files named and the
// effective config (the flags themselves: trainer_flags.cpp).
#include "trainer_options.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <filesystem>
#include <system_error>

#include "sp/format_gate.h"
#include "sp/output_path.h"
#include "sp/protocol.h"
#include "sp/rank_file.h"
#include "sp/transport/server_options.h"

namespace sp::trainer {
namespace {

std::string quoted(const std::string& s) {
    return "'" + s + "'";
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
    if (o.precision_scope) c.precision_scope = *o.precision_scope;
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
// value, found here, with the agent's own rule (sp/output_path.h). `what` names the file in the
// symlink message.
void validate_output_path(const std::string& source, const std::string& path, const std::string& what) {
    if (std::string problem = output_path_problem(path, what); !problem.empty())
        throw UsageError(source + ": " + problem);
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

}  // namespace

void check_trainer_options(TrainerOptions& o) {
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
    if (o.swap_slots_given && !o.block_swap)
        throw UsageError(
            "--swap-slots needs --weight-residency block-swap (the other residencies have no slots)");
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

std::string_view to_string(PrecisionChoice p) {
    return p.uniform ? to_string(*p.uniform) : std::string_view("policy");
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

}  // namespace sp::trainer
