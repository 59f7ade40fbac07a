// sp-trainer's flags, declared once each with CLI11: the name, the metavariable, the default, the
// value's check and the help line. --help is generated from these declarations, so the flags and
// their help cannot disagree. What no single flag can check (combinations, the files named, the
// effective config) is check_trainer_options's, in trainer_options.cpp.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <sstream>
#include <system_error>
#include <type_traits>

#include "sp/precision.h"
#include "trainer_options.h"

namespace sp::trainer {
namespace {

constexpr std::size_t kHelpWidth = 100;  // --help's lines, flag column included

// (Not `quoted`: for a non-const string argument, lookup prefers std::quoted.)
std::string single_quoted(const std::string& s) {
    return "'" + s + "'";
}

// "a, b or c": the choices as the messages list them.
std::string one_of_words(const std::vector<std::string>& choices) {
    std::string words;
    for (std::size_t i = 0; i < choices.size(); ++i)
        words += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    return words;
}

// The value checks. CLI11 reports a failed one as "FLAG: <what the check returned>".

// A whole-string decimal integer in [lo, hi]; "12abc", "", "1e3" and out-of-range values are
// rejected. The value goes on in canonical decimal, since CLI11 reads "010" as octal.
template <typename Int>
CLI::Validator integer_in(Int lo, Int hi) {
    return CLI::Validator(
        [lo, hi](std::string& text) -> std::string {
            Int value{};
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            const bool negative_unsigned = std::is_unsigned_v<Int> && !text.empty() && text[0] == '-';
            if (negative_unsigned || ec == std::errc::result_out_of_range ||
                (ec == std::errc() && ptr == end && (value < lo || value > hi)))
                return single_quoted(text) + " is out of range (" + std::to_string(lo) + " .. " +
                       std::to_string(hi) + ")";
            if (ec != std::errc() || ptr != end) return "expected an integer, got " + single_quoted(text);
            text = std::to_string(value);
            return {};
        },
        "");
}

// A whole-string finite number in (0, hi]. The value goes on in hexadecimal: CLI11 converts through
// long double, which can round a decimal twice, and the trainer's runs are compared bit for bit.
CLI::Validator positive_number_up_to(double hi) {
    return CLI::Validator(
        [hi](std::string& text) -> std::string {
            double value = 0;
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            if (ec == std::errc::invalid_argument || ptr != end)
                return "expected a number, got " + single_quoted(text);
            if (ec != std::errc() || !std::isfinite(value) || value <= 0 || value > hi) {
                std::ostringstream range;
                range << "(0, " << hi << "]";
                return single_quoted(text) + " is out of range " + range.str();
            }
            char hex[64];
            const auto written = std::to_chars(hex, hex + sizeof hex, value, std::chars_format::hex);
            text = "0x" + std::string(hex, written.ptr);
            return {};
        },
        "");
}

CLI::Validator non_empty(const std::string& complaint) {
    return CLI::Validator([complaint](std::string& text) { return text.empty() ? complaint : std::string(); },
                          "");
}

CLI::Validator one_of(const std::vector<std::string>& choices) {
    return CLI::Validator(
        [choices](std::string& text) {
            return std::find(choices.begin(), choices.end(), text) != choices.end()
                       ? std::string()
                       : "expected " + one_of_words(choices) + ", got " + single_quoted(text);
        },
        "");
}

std::vector<std::string> precision_choices() {
    std::vector<std::string> choices = {"policy"};
    for (Precision p : kAllPrecisions) choices.emplace_back(to_string(p));
    return choices;
}

// CLI11 2.1 prints a help line as given; this formatter wraps it to the width of the help, so that
// the declarations below hold plain sentences.
class WrappingFormatter : public CLI::Formatter {
  public:
    std::string make_option_desc(const CLI::Option* opt) const override {
        const std::size_t width = kHelpWidth - get_column_width();
        std::istringstream words(opt->get_description());
        std::string text, line, word;
        while (words >> word) {
            if (!line.empty() && line.size() + 1 + word.size() > width) {
                text += line + '\n';
                line.clear();
            }
            line += (line.empty() ? "" : " ") + word;
        }
        return text + line;
    }
};

// The flags below this call join help group `name`.
void start_group(CLI::App& app, const std::string& name) {
    app.option_defaults()->group(name);
}

// A flag that takes a value into `target`, shown in the help as "NAME METAVAR".
template <typename T>
CLI::Option* value_flag(CLI::App& app, const std::string& name, T& target, const std::string& metavar,
                        const std::string& help) {
    return app.add_option(name, target, help)->type_name(metavar);
}

void declare_shape_flags(CLI::App& app, TrainerOptions& o) {
    start_group(app, "Model and training");
    value_flag(app, "--steps", o.steps, "N", "training steps (0: evaluate and exit)")
        ->transform(integer_in<std::int64_t>(0, 1'000'000'000))
        ->capture_default_str();
    value_flag(app, "--blocks", o.blocks, "N", "transformer blocks, the units the agent routes")
        ->transform(integer_in(1, 1024))
        ->capture_default_str();
    value_flag(app, "--d-model", o.d_model, "N", "model width, divisible by --heads")
        ->transform(integer_in(1, 65536))
        ->capture_default_str();
    value_flag(app, "--heads", o.heads, "N", "attention heads")
        ->transform(integer_in(1, 4096))
        ->capture_default_str();
    value_flag(app, "--seq-len", o.seq_len, "N", "tokens (bytes) per sequence")
        ->transform(integer_in(1, 1 << 20))
        ->capture_default_str();
    value_flag(app, "--batch", o.batch, "N", "sequences per step")
        ->transform(integer_in(1, 1 << 20))
        ->capture_default_str();
    value_flag(app, "--lr", o.lr, "X", "peak AdamW learning rate (warm-up, then cosine decay to lr/10)")
        ->transform(positive_number_up_to(1.0))
        ->capture_default_str();
    value_flag(app, "--seed", o.seed, "S", "initial weights, batches and calibration inputs")
        ->transform(integer_in<std::uint64_t>(0, UINT64_MAX))
        ->capture_default_str();
    value_flag(app, "--eval-every", o.eval_every, "N", "held-out loss every N steps")
        ->transform(integer_in<std::int64_t>(1, 1'000'000'000))
        ->capture_default_str();
    value_flag(app, "--eval-batches", o.eval_batches, "N", "held-out batches per evaluation")
        ->transform(integer_in(1, 100'000))
        ->capture_default_str();
}

void declare_run_flags(CLI::App& app, TrainerOptions& o) {
    const TrainerOptions defaults;
    value_flag(app, "--text", o.text_path, "FILE",
               "training text, >= 20 * seq-len bytes (default: the bundled KJV Torah)");
    app.add_option_function<std::string>(
           "--text-part",
           [&o](const std::string& v) {
               o.text_part = v == "all"        ? TextPart::all
                             : v == "pretrain" ? TextPart::pretrain
                                               : TextPart::finetune;
           },
           "all | pretrain (the text's first 60%) | finetune (the rest); the last 10% of the part is held "
           "out for evaluation")
        ->type_name("P")
        ->check(one_of({"all", "pretrain", "finetune"}))
        ->default_str(std::string(to_string(defaults.text_part)));
    value_flag(app, "--device", o.device, "D", "where to train: cpu or cuda")
        ->check(one_of({"cpu", "cuda"}))
        ->capture_default_str();
    value_flag(app, "--init-checkpoint", o.init_checkpoint, "FILE",
               "start from a checkpoint's weights and optimizer state (the shape flags must match it, else "
               "exit 2)")
        ->check(non_empty("the value is empty"));
    value_flag(app, "--save-checkpoint", o.save_checkpoint, "FILE",
               "write the model and optimizer state at the end (LibTorch archive)")
        ->check(non_empty("the value is empty"));
    app.add_option_function<std::string>(
           "--finetune-mode", [&o](const std::string& v) { o.adapters = v == "adapters"; },
           "full: every parameter trains, re-quantized from fp32 masters every step | adapters: the base is "
           "frozen and stored in each block's format; low-rank adapters on the blocks' linear layers train "
           "in fp32")
        ->type_name("M")
        ->check(one_of({"full", "adapters"}))
        ->default_str(defaults.adapters ? "adapters" : "full");
    value_flag(app, "--adapter-rank", o.adapter_rank, "R",
               "the adapters' rank (with --finetune-mode adapters)")
        ->transform(integer_in(1, 4096))
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--weight-residency",
           [&o](const std::string& v) {
               o.resident = v == "resident";
               o.block_swap = v == "block-swap";
           },
           "streamed: every block's payload is sent to the compute copy after every optimizer step, as for "
           "weights streamed over PCIe | resident: only blocks whose values or format changed | block-swap: "
           "each block's payload uploaded just before its forward into one of --swap-slots slots, the next "
           "ones' uploads overlapping its compute")
        ->type_name("R")
        ->check(one_of({"streamed", "resident", "block-swap"}))
        ->default_str(defaults.resident ? "resident" : "streamed");
    value_flag(app, "--swap-slots", o.swap_slots, "K",
               "block-swap's slots (with --weight-residency block-swap): prefetch depth K-1; with a frozen "
               "base (adapters) the device memory the weights use is K slots of the largest block")
        ->transform(integer_in(1, 1024))
        ->capture_default_str();
    value_flag(app, "--threads", o.threads, "N",
               "CPU threads for the matrix products (default: the cores); with OpenBLAS they are "
               "OpenBLAS's and LibTorch's own pool gets one")
        ->transform(integer_in(1, 1024));
}

void declare_policy_flags(CLI::App& app, TrainerOptions& o) {
    start_group(app, "Selective Precision");
    value_flag(app, "--config", o.config_path, "CFG.json",
               "policy configuration (core/CONFIG.md); default: built-in defaults");
    app.add_option_function<std::string>(
           "--precision",
           [&o](const std::string& v) {
               o.precision.uniform = v == "policy" ? std::nullopt : parse_precision(v);
           },
           "policy (route per the config) | bf16 | int8 | int4 | fp8_e4m3 | fp8_e5m2 (every block in that "
           "format); the agent collects statistics in every case")
        ->type_name("P")
        ->check(one_of(precision_choices()))
        ->default_str(std::string(to_string(TrainerOptions().precision)));
    value_flag(app, "--precision-scope", o.precision_scope, "S",
               "compute: a block's format rounds its weights, its linear layers' inputs and the gradients at "
               "their outputs | weights: only its weights are stored and streamed in the format, computed in "
               "BF16 (block-swap); overrides the config's precision_scope (default: the config's, compute)")
        ->check(one_of({"compute", "weights"}));
    value_flag(app, "--telemetry", o.telemetry_path, "FILE",
               "write telemetry JSONL to FILE (overrides the config; turns it on)")
        ->check(non_empty("the file name is empty"));
    app.add_flag("--no-telemetry", o.no_telemetry, "write no telemetry");
    app.add_flag("--every-step-stats", o.every_step_stats,
                 "also write per-step block statistics (input for `sp-ctl simulate`)");
}

void declare_network_flags(CLI::App& app, TrainerOptions& o) {
    start_group(app, "Live telemetry and control (agent/PROTOCOL.md; sp-ctl and sp-dashboard connect here)");
    value_flag(app, "--telemetry-endpoint", o.telemetry_endpoint, "E", "PUB socket")
        ->check(non_empty("the value is empty"))
        ->capture_default_str();
    value_flag(app, "--control-endpoint", o.control_endpoint, "E", "ROUTER socket for commands")
        ->check(non_empty("the value is empty"))
        ->capture_default_str();
    value_flag(app, "--server-key", o.server_key, "FILE.key",
               "CURVE secret key (sp-ctl keygen; mode 0600); required for non-loopback binds")
        ->check(non_empty("the value is empty"));
    value_flag(app, "--allowed-clients", o.allowed_clients, "FILE",
               "CURVE public keys of the clients allowed in, one per line (needs --server-key)")
        ->check(non_empty("the value is empty"));
    app.add_flag("--insecure", o.insecure, "allow a non-loopback bind without CURVE (a warning is logged)");
    app.add_flag("--no-network", o.no_network, "bind no sockets");
}

void declare_data_parallel_flags(CLI::App& app, TrainerOptions& o) {
    start_group(app, "Data-parallel training (c10d with Gloo; agent/PROTOCOL.md section 11)");
    value_flag(app, "--world-size", o.world_size, "N", "ranks in the job (1: no process group)")
        ->transform(integer_in(1, 1024))
        ->capture_default_str();
    value_flag(app, "--rank", o.rank, "R",
               "this process's rank, 0..N-1; rank 0 decides and takes commands, rank R's endpoints are the "
               "ones above with the port + 2*R, and its telemetry file is NAME.rankR.jsonl")
        ->transform(integer_in(0, 1023))
        ->capture_default_str();
    value_flag(app, "--master-addr", o.master_addr, "A", "where rank 0 hosts the rendezvous")
        ->check(non_empty("the value is empty"))
        ->capture_default_str();
    value_flag(app, "--master-port", o.master_port, "P", "its port (with --spawn, a free one unless given)")
        ->transform(integer_in(1, 65535))
        ->capture_default_str();
    value_flag(app, "--spawn", o.spawn, "N",
               "start ranks 0..N-1 of this command line on this machine, each rank's output prefixed with "
               "[rank R]; exits with the first failing rank's status")
        ->transform(integer_in(1, 64));
}

void declare_experiment_flags(CLI::App& app, TrainerOptions& o) {
    start_group(app, "Experiments (tools/experiment)");
    value_flag(app, "--harsh-block", o.harsh_block, "B",
               "a planted fault: block B's \"INT8\" is stochastic ternary rounding onto a grid of K times "
               "each row's absmax (K = --harsh-step); BF16 is unaffected")
        ->transform(integer_in(0, 1023));
    value_flag(app, "--harsh-step", o.harsh_step, "K", "that grid's step in row absmaxes")
        ->transform(positive_number_up_to(1e6))
        ->capture_default_str();
    value_flag(app, "--outlier-block", o.outlier_block, "B",
               "outlier features in block B: a function-preserving reparameterization that scales 4 value "
               "channels down by S and the matching input columns of the attention output projection up by "
               "S (same BF16 function; per-row INT8/INT4 lose the small columns, FP8 keeps them); the "
               "optimizer steps the unplanted weights, so the plant lasts the whole run")
        ->transform(integer_in(0, 1023));
    value_flag(app, "--outlier-scale", o.outlier_scale, "S",
               "that factor (a power of two keeps BF16 bit-identical)")
        ->transform(positive_number_up_to(1e6))
        ->capture_default_str();
    value_flag(
        app, "--snr-validation", o.snr_validation, "FILE",
        "at each distribution-statistics step, write every linear layer's SNR estimates next to the "
        "truth (output SNR over the batch) to FILE (JSONL), and print their agreement after the summary")
        ->check(non_empty("the value is empty"));
    value_flag(app, "--summary-json", o.summary_json, "FILE",
               "write the run's summary and eval-loss curve as JSON")
        ->check(non_empty("the file name is empty"));
    value_flag(app, "--probe-maps", o.probe_maps, "FILE",
               "JSONL of {\"step\": S, \"name\": N, \"map\": [format per block]}: after S updates, each "
               "map's held-out loss and gradient against all-BF16's, on the same weights and batches "
               "(training continues unchanged)")
        ->check(non_empty("the value is empty"));
    value_flag(app, "--probe-out", o.probe_out, "FILE",
               "where the probes' results go (JSONL; with --probe-maps)")
        ->check(non_empty("the value is empty"));
}

// Every flag, bound to `o`; the help comes from these declarations.
void declare_flags(CLI::App& app, TrainerOptions& o) {
    app.formatter(std::make_shared<WrappingFormatter>());
    // Today's conventions: a flag given twice takes its last value, and a switch takes no value.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();
    // Unknown flags and stray words are kept and refused afterwards in sp-trainer's own words.
    app.allow_extras();
    declare_shape_flags(app, o);
    declare_run_flags(app, o);
    declare_policy_flags(app, o);
    declare_network_flags(app, o);
    declare_data_parallel_flags(app, o);
    declare_experiment_flags(app, o);
    start_group(app, "Output");
    app.add_flag("--quiet", o.quiet, "no progress lines, only the summary");
    app.set_help_flag("-h,--help", "this text");
    app.footer(
        "Without --telemetry or --no-telemetry the config decides; the default config writes\n"
        "selective_precision_telemetry.jsonl in the current directory. Data-parallel runs: the config key\n"
        "distributed_stats_mode \"sharded\" has each rank read a 1/N slice of every gradient and the\n"
        "statistics all-gathered; process_group_timeout_s bounds every wait.\n"
        "Exit status: 0 done, 1 failed while running, 2 bad flag, value or config (nothing written).\n\n"
        "Example: " +
        app.get_name() + " --steps 300 --telemetry run.jsonl");
}

std::string_view flag_name(const std::string& arg) {
    return std::string_view(arg).substr(0, arg.find('='));
}

// Whether `name` is a flag that takes a value (a switch expects none).
bool takes_value(const CLI::App& app, std::string_view name) {
    const CLI::Option* option = app.get_option_no_throw(std::string(name));
    return option != nullptr && option->get_items_expected_max() != 0;
}

bool is_switch(const CLI::App& app, std::string_view name) {
    const CLI::Option* option = app.get_option_no_throw(std::string(name));
    return option != nullptr && option->get_items_expected_max() == 0;
}

// CLI11 reads "--flag=" as "--flag" and takes the next argument for the value (--telemetry=
// --no-network would name the file "--no-network"): the empty value goes on as an argument of its own.
std::vector<std::string> with_empty_values_apart(const CLI::App& app, const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (const std::string& arg : args) {
        const bool empty_value =
            arg.rfind("--", 0) == 0 && arg.find('=') == arg.size() - 1 && takes_value(app, flag_name(arg));
        out.push_back(empty_value ? arg.substr(0, arg.size() - 1) : arg);
        if (empty_value) out.emplace_back();
    }
    return out;
}

// CLI11's ArgumentMismatch means a switch given a value (--quiet=1) or a flag that ends the command
// line without its value; the message says which flag, in today's words.
std::string argument_mismatch_message(const CLI::App& app, const std::vector<std::string>& args,
                                      const CLI::ArgumentMismatch& e) {
    for (const std::string& arg : args) {
        const auto eq = arg.find('=');
        // "--quiet=true" is CLI11's own spelling of the switch, and allowed.
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos && is_switch(app, flag_name(arg)) &&
            arg.substr(eq + 1) != "true")
            return std::string(flag_name(arg)) + " takes no value";
    }
    if (!args.empty() && takes_value(app, args.back())) return args.back() + " needs a value";
    return e.what();
}

// What CLI11 kept aside (allow_extras): the first is refused.
void reject_extras(const std::vector<std::string>& extras) {
    if (extras.empty()) return;
    const std::string& arg = extras.front();
    if (!arg.empty() && arg.front() == '-')
        throw UsageError("unknown flag " +
                         single_quoted(std::string(arg.rfind("--", 0) == 0 ? flag_name(arg) : arg)));
    throw UsageError("unexpected argument " + single_quoted(arg) + " (sp-trainer takes flags only)");
}

}  // namespace

std::string usage_text(const std::string& program) {
    TrainerOptions defaults;  // the defaults shown are the code's
    CLI::App app(
        "Trains a small byte-level GPT on a text file while Selective Precision routes its transformer\n"
        "blocks to BF16, INT8, FP8 (E4M3, E5M2) or INT4 from their gradient statistics and the SNR\n"
        "of each format.\n",
        program);
    declare_flags(app, defaults);
    return app.help();
}

TrainerOptions parse_trainer_options(const std::vector<std::string>& args, const std::string& default_text) {
    TrainerOptions o;
    o.text_path = default_text;
    CLI::App app("", "sp-trainer");
    declare_flags(app, o);
    std::vector<std::string> reversed = with_empty_values_apart(app, args);
    std::reverse(reversed.begin(), reversed.end());  // CLI11 takes the arguments last first
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
        o.help = true;
        return o;
    } catch (const CLI::ArgumentMismatch& e) {
        throw UsageError(argument_mismatch_message(app, args, e));
    } catch (const CLI::ParseError& e) {
        throw UsageError(e.what());
    }
    reject_extras(app.remaining());
    o.master_port_given = app.count("--master-port") > 0;
    o.adapter_rank_given = app.count("--adapter-rank") > 0;
    o.swap_slots_given = app.count("--swap-slots") > 0;
    check_trainer_options(o);
    return o;
}

}  // namespace sp::trainer
