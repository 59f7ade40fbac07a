#pragma once
// sp-trainer's command line: parsing, validation and the effective Selective Precision config.
// Everything is checked here, before the trainer creates any file: a bad flag or value, an invalid
// config, a missing text file or an unavailable device all end in a UsageError. The flags are
// declared once, with CLI11, in trainer_flags.cpp (their checks and help lines with them); the
// checks across flags are in trainer_options.cpp.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sp/config.h"
#include "text_part.h"

namespace sp::trainer {

// How the routed blocks run: Selective Precision as the config says, or every block in one format
// (bf16: config mode "off"; another format: mode "static" with every block in its
// force_<format>_blocks list). The agent collects statistics and writes telemetry in every case, so
// the runs are comparable.
struct PrecisionChoice {
    std::optional<Precision> uniform;  // none: the policy routes
};

struct TrainerOptions {
    std::int64_t steps = 300;
    int blocks = 4;
    // Sized so that the 300-step demo trains in about half a minute on 2 cores with OpenBLAS
    // (packaging/setup.sh installs it); README.md has the measurements.
    int d_model = 64;
    int heads = 4;
    int seq_len = 64;
    int batch = 8;
    double lr = 3e-3;
    std::string config_path;                     // "" -> the built-in defaults
    std::optional<std::string> telemetry_path;   // --telemetry
    std::optional<std::string> precision_scope;  // --precision-scope: overrides the config's
    bool no_telemetry = false;                   // --no-telemetry
    bool every_step_stats = false;               // --every-step-stats
    std::uint64_t seed = 1;
    std::int64_t eval_every = 50;
    int eval_batches = 8;
    std::string device = "cpu";  // "cpu" or "cuda"
    PrecisionChoice precision;
    std::string text_path;               // defaults to the bundled corpus
    TextPart text_part = TextPart::all;  // --text-part
    std::optional<int> threads;          // at::set_num_threads; unset -> LibTorch's default
    bool quiet = false;
    bool help = false;
    // Experiments (tools/experiment): a block made INT8-hostile on purpose, and a
    // machine-readable summary of the run.
    std::optional<int> harsh_block;    // --harsh-block B
    double harsh_step = 16.0;          // --harsh-step K
    std::string summary_json;          // --summary-json FILE
    std::optional<int> outlier_block;  // --outlier-block B: outlier features planted in block B
    double outlier_scale = 64.0;       // --outlier-scale S
    std::string snr_validation;        // --snr-validation FILE: estimators against the truth (JSONL)
    // --probe-maps FILE / --probe-out FILE (map_probe.h): at the steps the file names, the loss and
    // gradient under other precision maps, on the held-out batches, against all-BF16.
    std::string probe_maps;
    std::string probe_out;
    static constexpr std::uintmax_t kMaxProbeMapsBytes = std::uintmax_t(16) << 20;
    // Checkpoints (gpt_model.h): the model and optimizer state written at the end, or started from.
    std::string save_checkpoint;  // --save-checkpoint FILE
    std::string init_checkpoint;  // --init-checkpoint FILE
    // How a fine-tune trains (--finetune-mode): every parameter, re-quantized from fp32 masters
    // every step ("full"), or low-rank adapters of --adapter-rank on a frozen base that is stored in
    // each block's format ("adapters": a rounding error in the base is permanent).
    bool adapters = false;
    int adapter_rank = 8;
    // --weight-residency: every block's payload re-sent after every optimizer step ("streamed", the
    // default: weights that do not stay on the device), or only what changed ("resident"), or each
    // block uploaded just before its forward from host memory into one of --swap-slots slots
    // ("block-swap").
    bool resident = false;
    bool block_swap = false;
    int swap_slots = 2;  // --swap-slots K (block-swap only)
    bool swap_slots_given = false;
    bool adapter_rank_given = false;
    // Live telemetry and control (agent/PROTOCOL.md).
    bool no_network = false;           // --no-network: bind no sockets
    bool network_unavailable = false;  // built without the transport: no_network implied
    std::string telemetry_endpoint = "tcp://127.0.0.1:5556";
    std::string control_endpoint = "tcp://127.0.0.1:5557";
    std::string server_key;       // --server-key FILE.key: CURVE secret key (sp-ctl keygen)
    std::string allowed_clients;  // --allowed-clients FILE: client public keys, one per line
    bool insecure = false;        // --insecure: allow a non-loopback bind without CURVE
    // Data-parallel training on c10d/Gloo (README, "Two ranks"): this process is rank `rank` of
    // `world_size`; rank 0 hosts the rendezvous (a TCPStore) at master_addr:master_port. With
    // world_size > 1 the endpoints above are rank 0's, this rank's are offset by 2·rank, and the
    // telemetry file name carries the rank.
    int world_size = 1;                     // --world-size N
    int rank = 0;                           // --rank R
    std::string master_addr = "127.0.0.1";  // --master-addr A
    int master_port = 29500;                // --master-port P
    bool master_port_given = false;
    int spawn = 0;                        // --spawn N: start N local ranks of this command line
    std::string leader_control_endpoint;  // rank 0's control endpoint (what the others name)

    // The config the agent runs with: the file's (or the defaults), then the flags applied.
    Config config;
};

// A rejected command line; what() names the flag (or config key) and the offending value.
class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Parses and validates argv (without the program name). With --help only `help` is meaningful.
// Throws UsageError.
TrainerOptions parse_trainer_options(const std::vector<std::string>& args, const std::string& default_text);

// What no single flag can check: combinations, the files named, the effective config (which it
// sets). Part of parse_trainer_options; throws UsageError.
void check_trainer_options(TrainerOptions& o);

// The bundled training text: <prefix>/share/selective-precision/kjv_torah.txt next to the running
// executable's <prefix>/bin when installed, else the copy in the sources (a build-tree run).
std::string bundled_text_path();

// --help: generated by CLI11 from the flags' declarations.
std::string usage_text(const std::string& program);

std::string_view to_string(PrecisionChoice p);

}  // namespace sp::trainer
