// sp-trainer: the reference integration of Selective Precision. Trains a small byte-level GPT on a
// text file; the agent watches every block's gradients and routes the blocks to BF16, INT8, FP8 or
// INT4, and the reference precision runtime makes that routing real (the weights the forward pass
// uses are materialized in the routed precision after every optimizer step). Exit codes: 0 done, 1 a
// failure while running, 2 a bad command line or config (nothing written).
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "data_parallel.h"
#include "gpt_model.h"
#include "map_probe.h"
#include "run_summary.h"
#include "snr_validation.h"
#include "sp/agent/agent.h"
#include "sp/agent/cuda_grad_stats_collector.h"
#include "sp/agent/precision_runtime.h"
#include "sp/agent/process_group_link.h"
#include "sp/agent/threads.h"
#include "sp/run_end.h"
#include "stop_signal.h"
#include "text_data.h"
#include "trainer_options.h"

namespace sp::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Distinct streams from one --seed: training batches, held-out batches and calibration inputs must
// not share a generator, or adding an eval batch would change the training data.
constexpr std::uint64_t kEvalStream = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kCalibrationStream = 0xc2b2ae3d27d4eb4fULL;
constexpr std::uint64_t kRankStream = 0x165667b19e3779f9ULL;

// The calibration fingerprint's model identity: the model's shape, its initial weights (seed) and
// the calibration inputs (seed, batch, text) — any of them changing invalidates the cached errors.
// v2: linear inputs are rounded to the block's format as well as the weights.
std::string model_identity(const TrainerOptions& o, std::size_t text_bytes) {
    std::string id =
        format("sp-trainer gpt v2 blocks=%d d=%d heads=%d seq=%d seed=%llu batch=%d text=%zu", o.blocks,
               o.d_model, o.heads, o.seq_len, static_cast<unsigned long long>(o.seed), o.batch, text_bytes);
    if (o.text_part != TextPart::all) id += " part=" + std::string(to_string(o.text_part));
    if (o.harsh_block) id += format(" harsh=%d:%.17g", *o.harsh_block, o.harsh_step);
    if (o.outlier_block) id += format(" outliers=%d:%.17g", *o.outlier_block, o.outlier_scale);
    // The weights come from a checkpoint: which one, as of when it was written.
    if (!o.init_checkpoint.empty()) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(o.init_checkpoint, ec);
        const auto written =
            std::filesystem::last_write_time(o.init_checkpoint, ec).time_since_epoch().count();
        id += format(" init=%s:%llu:%lld", o.init_checkpoint.c_str(), static_cast<unsigned long long>(size),
                     static_cast<long long>(written));
    }
    return id;
}

std::string telemetry_description(const TrainerOptions& o) {
    const Config& c = o.config;
    if (!c.telemetry_enabled) return o.no_telemetry ? "off (--no-telemetry)" : "off (config)";
    if (o.telemetry_path) return c.telemetry_file;
    if (o.config_path.empty())
        return c.telemetry_file +
               " (the default config's file, in the current directory; "
               "--telemetry FILE or --no-telemetry to change)";
    return c.telemetry_file + " (from " + o.config_path + ")";
}

// Linear warm-up over the first 10% of the steps (at most 30), then cosine decay to a tenth of the
// peak. Without the warm-up Adam at the demo's learning rate spikes (loss 3 -> 11) around step 12,
// while its second-moment estimates are still young.
double learning_rate_at(std::int64_t step, std::int64_t steps, double peak) {
    const std::int64_t warmup = std::max<std::int64_t>(1, std::min<std::int64_t>(30, steps / 10));
    if (step < warmup) return peak * double(step + 1) / double(warmup);
    const double progress = double(step - warmup) / double(std::max<std::int64_t>(1, steps - warmup));
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
}

// The master of a block's `layer`-th linear layer (its layer-th parameter of two or more dimensions):
// the parameter itself may hold the BF16 compute copy (the weights scope) or nothing (block-swap).
const at::Tensor& layer_weight(const agent::ReferencePrecisionRuntime& runtime, int block, int layer) {
    int seen = 0;
    for (std::size_t k = 0;; ++k) {
        const at::Tensor* master = runtime.master(std::size_t(block), k);
        if (!master) break;
        if (master->dim() >= 2 && seen++ == layer) return *master;
    }
    throw std::out_of_range("no linear layer " + std::to_string(layer) + " in block " +
                            std::to_string(block));
}

// Calibration inputs: one fixed batch per sample from the training split, drawn from its own
// generator; the activation entering block b is the embedding run through blocks 0..b-1.
// Returns the line to print; `summary` says where the errors came from.
std::string run_calibration(const TrainerOptions& o, const TextData& text, GptModel& model,
                            agent::Agent& agent, std::string& summary) {
    std::mt19937_64 calibration_rng(o.seed ^ kCalibrationStream);
    std::vector<Batch> samples;
    samples.reserve(std::size_t(o.config.calibration_samples));
    for (int s = 0; s < o.config.calibration_samples; ++s)
        samples.push_back(text.sample(Split::train, calibration_rng, o.batch, o.seq_len, o.device));
    agent::CalibrationHooks hooks;
    hooks.input = [&](int block, int sample) {
        at::NoGradGuard no_grad;
        auto x = model.embed(samples.at(std::size_t(sample)).tokens);
        for (int b = 0; b < block; ++b) x = model.run_block(b, x);
        return x;
    };
    // The block computes in the precision its weights are in: its linear inputs are rounded too.
    Precision weights_format = Precision::bf16;
    hooks.compute_format = [&](int, Precision weights) { weights_format = weights; };
    hooks.forward = [&](int block, const at::Tensor& x) { return model.run_block(block, x, weights_format); };
    const auto t0 = Clock::now();
    const auto& result = agent.calibrate(hooks);
    std::string line = format("calibration: %s in %.2f s; INT8 relative output error per block:",
                              result.from_cache ? "loaded from cache" : "measured", seconds_since(t0));
    for (double e : result.errors) line += format(" %.4f", e);
    if (!result.cache_path.empty()) line += " (cache " + result.cache_path + ")";
    summary = result.from_cache
                  ? "loaded from cache " + result.cache_path
                  : "measured" + (result.cache_path.empty() ? std::string(" (not cached)")
                                                            : ", cached in " + result.cache_path);
    return line;
}

// Prints a line of the run's story unless --quiet.
struct Say {
    bool quiet = false;
    void operator()(const std::string& line) const {
        if (!quiet) std::cout << line << std::endl;
    }
};

GptShape model_shape(const TrainerOptions& o) {
    GptShape shape;
    shape.blocks = o.blocks;
    shape.d_model = o.d_model;
    shape.heads = o.heads;
    shape.seq_len = o.seq_len;
    return shape;
}

// What is about to run: the model, the text, the precision, the telemetry and any planted trouble.
void announce(const TrainerOptions& o, const GptModel& model, const TextData& text,
              const std::string& threads, const Say& say) {
    say(format("sp-trainer: %d blocks, d_model %d, %d heads, seq %d, batch %d; %lld parameters (%lld routed)",
               o.blocks, o.d_model, o.heads, o.seq_len, o.batch,
               static_cast<long long>(model.parameter_count()),
               static_cast<long long>(model.block_parameter_count())));
    say(format(
        "text: %s%s, %zu bytes (%zu train, %zu held out); device %s, %s", o.text_path.c_str(),
        o.text_part == TextPart::all ? "" : (" (" + std::string(to_string(o.text_part)) + " part)").c_str(),
        text.size(), text.split_size(Split::train), text.split_size(Split::heldout), o.device.c_str(),
        threads.c_str()));
    if (!o.init_checkpoint.empty()) say("checkpoint: " + o.init_checkpoint);
    if (o.adapters)
        say(format("fine-tune: adapters of rank %d on a frozen base stored in each block's format",
                   o.adapter_rank));
    say("precision: " + std::string(to_string(o.precision)) + " (config mode " +
        std::string(to_string(o.config.effective_mode())) + ")");
    say("telemetry: " + telemetry_description(o));
    if (o.world_size > 1)
        say(format("data-parallel: rank %d of %d, process group (Gloo) at %s:%d, statistics %s", o.rank,
                   o.world_size, o.master_addr.c_str(), o.master_port,
                   o.config.distributed_stats_mode.c_str()));
    if (o.outlier_block)
        say(format("planted outliers: blocks.%d, %d value channels / %g and attn_out columns x %g",
                   *o.outlier_block, GptModel::kOutlierChannels, o.outlier_scale, o.outlier_scale));
    if (o.harsh_block)
        say(format(
            "planted fault: blocks.%d's INT8 is stochastic ternary rounding, grid step %g x row absmax",
            *o.harsh_block, o.harsh_step));
}

// The agent, live on its endpoints unless --no-network, with the model's blocks registered. A refused
// or busy endpoint is the operator's to fix, like a bad flag: a UsageError (exit 2, nothing written).
std::unique_ptr<agent::Agent> start_agent(const TrainerOptions& o, std::size_t text_bytes,
                                          const GptModel& model,
                                          const std::shared_ptr<agent::ProcessGroupLink>& link,
                                          const Say& say) {
    agent::AgentOptions agent_options;
    agent_options.data_parallel = link;
    // Sharded statistics: this rank reads its slice of every gradient, as an FSDP or ZeRO rank holds it.
    if (link && o.config.distributed_stats_mode == "sharded")
        agent_options.collector = agent::make_cpu_grad_stats_collector({link->rank(), link->world_size()});
    agent_options.producer = "sp-trainer " SP_VERSION;
    agent_options.model_identity = model_identity(o, text_bytes);
#if SP_AGENT_HAVE_CUDA
    // On CUDA the fused pass reads the gradients where they are; the CPU collector would need them
    // on the host.
    if (o.device == "cuda") agent_options.collector = agent::make_cuda_grad_stats_collector();
#endif
    agent_options.log = [quiet = o.quiet](const std::string& line) {
        if (!quiet) std::cout << "  agent: " << line << std::endl;
    };
    if (!o.no_network) {
        transport::ServerOptions server;
        server.telemetry_endpoint = o.telemetry_endpoint;
        server.control_endpoint = o.control_endpoint;
        server.server_secret_key_file = o.server_key;
        server.allowed_clients_file = o.allowed_clients;
        server.insecure = o.insecure;
        server.log = [](const std::string& line) { std::cerr << "sp-trainer: " << line << '\n'; };
        agent_options.server = std::move(server);
    }
    std::unique_ptr<agent::Agent> agent;
    try {
        agent = std::make_unique<agent::Agent>(o.config, std::move(agent_options));
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
    }
    if (!o.no_network) say("live: telemetry " + o.telemetry_endpoint + ", control " + o.control_endpoint);
    if (o.network_unavailable)
        say("live: off (this sp-trainer was built without the network transport, SP_BUILD_TRANSPORT=OFF; "
            "telemetry goes to the file only)");
    std::vector<agent::AgentBlock> blocks = model.agent_blocks();
    if (o.harsh_block) blocks[std::size_t(*o.harsh_block)].harsh_int8_step = o.harsh_step;
    agent->register_blocks(std::move(blocks));
    return agent;
}

// The training loop: one optimizer step per training batch with the agent around it, the held-out
// evaluations, the per-step totals and the progress lines.
class TrainingLoop {
  public:
    TrainingLoop(const TrainerOptions& o, const TextData& text, GptModel& model, agent::Agent& agent,
                 agent::ReferencePrecisionRuntime& runtime, SnrValidation* validation, MapProbe* probe,
                 RunTotals& totals, agent::ProcessGroupLink* link)
        : o_(o),
          text_(text),
          model_(model),
          agent_(agent),
          runtime_(runtime),
          validation_(validation),
          probe_(probe),
          totals_(totals),
          link_(link),
          optimizer_(model, o.lr),
          // Each rank draws its own batches; rank 0 draws what a single process would.
          train_rng_(o.seed ^ (std::uint64_t(o.rank) * kRankStream)) {
        std::mt19937_64 eval_rng(o.seed ^ kEvalStream);
        for (int i = 0; i < o.eval_batches; ++i)
            eval_set_.push_back(text.sample(Split::heldout, eval_rng, o.batch, o.seq_len, o.device));
        if (!o.init_checkpoint.empty()) load_optimizer_checkpoint(o.init_checkpoint, optimizer_);
    }

    // --save-checkpoint: the fp32 masters (not the compute copy in its routed formats) and the
    // optimizer's state. Rank 0 writes it in a data-parallel job: every rank holds the same weights.
    void save_checkpoint_if_asked() {
        if (o_.save_checkpoint.empty() || o_.rank != 0) return;
        runtime_.before_optimizer_step();  // the masters into the parameters; the run is over
        save_checkpoint(o_.save_checkpoint, model_, optimizer_);
    }

    // The held-out loss before training: the initial point of the curve, and what step 0 reports.
    void evaluate_before_training() {
        const auto t0 = Clock::now();
        totals_.initial_eval = totals_.final_eval = evaluate();
        totals_.eval_s += seconds_since(t0);
        totals_.eval_curve.emplace_back(0, totals_.initial_eval);
    }

    // Every step (until a stop signal), then the run's end in the telemetry: completed, interrupted,
    // or the error that stopped it. Returns the loop's wall time in seconds.
    double run() {
        double seconds = 0;
        try {
            seconds = run_steps();
        } catch (const std::exception& e) {
            agent_.end_run(std::string("error: ") + e.what());  // the file says why it stops there
            throw;
        }
        // Stopped early: by a signal here or, in a data-parallel job, on another rank.
        const bool stopped = stop_signal() != 0 || totals_.steps_done < o_.steps;
        totals_.end_reason = std::string(stopped ? kRunEndInterrupted : kRunEndCompleted);
        agent_.end_run(totals_.end_reason);
        return seconds;
    }

  private:
    double run_steps() {
        previous_ = runtime_.precisions();
        last_print_ = Clock::now();
        const auto loop_start = Clock::now();
        for (std::int64_t step = 0; step < o_.steps && !stop_requested(step); ++step) {
            probe_maps_due(step);
            record_map(step);
            const auto step_start = Clock::now();
            const at::Tensor loss = train_step(step);
            const agent::TransferBytes bytes = runtime_.step_bytes();
            agent_.record_transfer(bytes.copied, bytes.bf16);
            totals_.bytes_copied_in_steps += bytes.copied;
            totals_.bytes_bf16_in_steps += bytes.bf16;

            const bool eval_step = step == 0 || step % o_.eval_every == 0 || step == o_.steps - 1;
            const double eval_s = eval_step ? evaluate_after(step) : 0.0;
            const double loss_value = loss.item<double>();
            agent_.end_step(loss_value);
            totals_.train_losses.push_back(loss_value);
            // The evaluation is not part of the training step the agent's overhead is compared with.
            totals_.eval_s += eval_s;
            const double step_s = seconds_since(step_start) - eval_s;
            totals_.train_step_s += step_s;
            totals_.step_s.push_back(step_s);

            const int low_blocks = count_precisions();
            totals_.saving_pct_sum += bytes.saving_pct();
            loss_sum_since_print_ += loss_value;
            ++losses_since_print_;
            if (!o_.quiet && (step % 10 == 0 || eval_step || step == o_.steps - 1))
                print_progress(step, eval_step, low_blocks, bytes.saving_pct());
            totals_.steps_done = step + 1;
        }
        if (totals_.steps_done == o_.steps) probe_maps_due(o_.steps);
        record_map(totals_.steps_done);
        return seconds_since(loop_start);
    }

    // The map step `step` computes with, when it differs from the last one recorded.
    void record_map(std::int64_t step) {
        if (totals_.maps.empty() || totals_.maps.back().second != runtime_.precisions())
            totals_.maps.emplace_back(step, runtime_.precisions());
    }

    // --probe-maps: the maps due after `step` updates, on the held-out batches (not training time).
    void probe_maps_due(std::int64_t step) {
        if (!probe_) return;
        const auto t0 = Clock::now();
        probe_->run_due(step, model_, runtime_, eval_set_, std::size_t(o_.config.int4_group_size));
        totals_.eval_s += seconds_since(t0);
    }

    // A signal stops the run between two steps; in a data-parallel job every rank stops at the same
    // step when any rank got one (Ctrl-C reaches them at slightly different times).
    bool stop_requested(std::int64_t step) {
        if (!link_) return stop_signal() != 0;
        return link_->all_reduce_mean(stop_signal() != 0 ? 1.0 : 0.0, "all-reduce of the stop flag", step) >
               0;
    }

    double evaluate() {
        at::NoGradGuard no_grad;
        double sum = 0;
        for (const auto& b : eval_set_) sum += model_.loss(b.tokens, b.targets).item<double>();
        return sum / double(eval_set_.size());
    }

    // One optimizer step on a fresh training batch, with the agent around it; returns the batch's loss.
    at::Tensor train_step(std::int64_t step) {
        const agent::SwapStats swap_before = runtime_.swap_stats();
        agent_.begin_step(step);
        const Batch batch = text_.sample(Split::train, train_rng_, o_.batch, o_.seq_len, o_.device);
        // Distribution statistics steps: the agent profiles the inputs of the blocks' linear layers.
        if (agent_.wants_layer_inputs(step)) {
            model_.set_layer_input_observer([this](int block, int layer, const at::Tensor& x) {
                agent_.observe_layer_input(block, layer, x);
                if (validation_) validation_->observe_input(block, layer, x);
            });
            model_.set_layer_output_grad_observer([this](int block, int layer, const at::Tensor& g) {
                agent_.observe_layer_output_grad(block, layer, g);
            });
        }
        // The map of this step (a rollback in the last end_step included): inputs follow the weights.
        model_.set_compute_formats(runtime_.precisions(), std::size_t(o_.config.int4_group_size));
        at::Tensor loss = model_.loss(batch.tokens, batch.targets);
        model_.set_layer_input_observer({});
        model_.set_layer_output_grad_observer({});
        optimizer_.zero_grad();
        loss.backward();
        // Data-parallel: every rank steps with the mean of the ranks' gradients (what DDP does).
        if (link_) link_->average_gradients(model_.parameters(), step);
        agent_.collect_block_grad_stats();
        // Masters back into the parameters first: the map compute_hints delivers (on_hints) is then
        // only recorded, and materialized once, after the optimizer step, with the updated weights.
        // Frozen base weights are read before the map is made only on the agent's profiling steps.
        runtime_.before_optimizer_step(agent_.wants_layer_inputs(step));
        agent_.compute_hints(step);
        if (validation_)
            validation_->finish(step, [this](int block, int layer) -> const at::Tensor& {
                return layer_weight(runtime_, block, layer);
            });
        optimizer_.set_learning_rate(learning_rate_at(step, o_.steps, o_.lr));
        optimizer_.step();
        const auto weights_start = Clock::now();
        runtime_.after_optimizer_step();
        totals_.weights_s += seconds_since(weights_start);
        count_swap_time(swap_before);
        return loss;
    }

    // Block-swap's uploads and expansions in this training step (its evaluations excluded).
    void count_swap_time(const agent::SwapStats& before) {
        if (runtime_.weight_residency() != agent::WeightResidency::block_swap) return;
        const agent::SwapStats now = runtime_.swap_stats();
        totals_.upload_s += now.upload_s - before.upload_s;
        totals_.expand_s += now.expand_s - before.expand_s;
        totals_.weights_s += (now.upload_s - before.upload_s) + (now.expand_s - before.expand_s);
    }

    // The held-out loss of an evaluation step: step 0 carries the one measured before training, later
    // ones a fresh evaluation. Returns the seconds it took.
    double evaluate_after(std::int64_t step) {
        double seconds = 0;
        if (step > 0) {
            const auto t0 = Clock::now();
            totals_.final_eval = evaluate();
            seconds = seconds_since(t0);
            totals_.eval_curve.emplace_back(step + 1, totals_.final_eval);  // after step+1 updates
        }
        // Step 0's loss was measured before training: the chart draws it at step 0, not at the
        // first update record that carries it.
        agent_.record_eval_loss(totals_.final_eval, step);
        return seconds;
    }

    // Counts the step's block-steps per format and the blocks that switched since the last step;
    // returns how many blocks are below BF16.
    int count_precisions() {
        const auto& now_precisions = runtime_.precisions();
        int low_blocks = 0;
        totals_.block_steps_per_block.resize(now_precisions.size());
        for (std::size_t b = 0; b < now_precisions.size(); ++b) {
            ++totals_.block_steps[std::size_t(now_precisions[b])];
            ++totals_.block_steps_per_block[b][std::size_t(now_precisions[b])];
            if (now_precisions[b] != Precision::bf16) ++low_blocks;
            if (now_precisions[b] != previous_[b]) ++totals_.switches;
        }
        previous_ = now_precisions;
        return low_blocks;
    }

    // The progress line: the mean training loss and the step rate since the last line.
    void print_progress(std::int64_t step, bool eval_step, int low_blocks, double saving_pct) {
        const double rate = double(step - last_print_step_) / seconds_since(last_print_);
        std::cout << format("step %5lld/%lld  train %.4f", static_cast<long long>(step),
                            static_cast<long long>(o_.steps), loss_sum_since_print_ / losses_since_print_)
                  << (eval_step ? format("  eval %.4f", totals_.final_eval) : std::string(13, ' '))
                  << format("  %6.2f steps/s  low %d/%zu  saving %5.1f%%", rate, low_blocks,
                            runtime_.precisions().size(), saving_pct)
                  << std::endl;
        loss_sum_since_print_ = 0;
        losses_since_print_ = 0;
        last_print_ = Clock::now();
        last_print_step_ = step;
    }

    const TrainerOptions& o_;
    const TextData& text_;
    GptModel& model_;
    agent::Agent& agent_;
    agent::ReferencePrecisionRuntime& runtime_;
    SnrValidation* validation_;
    MapProbe* probe_;  // null: no --probe-maps
    RunTotals& totals_;
    agent::ProcessGroupLink* link_;  // null: a single process
    AdamW optimizer_;
    std::mt19937_64 train_rng_;
    std::vector<Batch> eval_set_;
    std::vector<Precision> previous_;  // the map of the last step, to count switches
    double loss_sum_since_print_ = 0;
    int losses_since_print_ = 0;
    Clock::time_point last_print_;
    std::int64_t last_print_step_ = -1;
};

// --weight-residency (and the weights scope's BF16 base, which must come first), and each block's
// forward through the runtime: block-swap uploads the block there (a no-op in the other modes).
void set_residency(const TrainerOptions& o, GptModel& model, agent::ReferencePrecisionRuntime& runtime) {
    if (o.config.weights_scope()) runtime.compute_frozen_in_bf16();
    runtime.set_weight_residency(o.block_swap ? agent::WeightResidency::block_swap
                                 : o.resident ? agent::WeightResidency::resident
                                              : agent::WeightResidency::streamed,
                                 std::size_t(o.swap_slots));
    model.set_block_runner([&runtime](int block, const at::Tensor& x, const agent::BlockForward& forward) {
        return agent::run_swapped_block(runtime, std::size_t(block), x, forward);
    });
}

// The exit status of a run that completed but lost telemetry records to write errors (a full disk).
constexpr int kExitRecordsLost = 3;

int run(const TrainerOptions& o) {
    const auto run_start = Clock::now();
    RunTotals totals;
    totals.threads = agent::configure_threads(o.threads);  // sp/agent/threads.h
    const Say say{o.quiet};

    TextData text(o.text_path, std::size_t(o.seq_len) * 20, o.text_part);
    std::unique_ptr<MapProbe> probe;
    if (!o.probe_maps.empty()) {
        try {
            probe = std::make_unique<MapProbe>(o.probe_maps, o.probe_out, o.blocks, o.steps);
        } catch (const ProbeMapsError& e) {
            throw UsageError(e.what());
        }
    }
    GptModel model(model_shape(o), o.seed, o.device);
    if (!o.init_checkpoint.empty()) {
        try {
            load_model_checkpoint(o.init_checkpoint, model);  // before the plant: checkpoints are unplanted
        } catch (const CheckpointError& e) {
            throw UsageError(e.what());  // a checkpoint of another model is a bad value: exit 2
        }
    }
    if (o.outlier_block) model.plant_outliers(*o.outlier_block, o.outlier_scale);
    if (o.adapters) model.enable_adapters(o.adapter_rank, o.seed);  // the base, planted, frozen
    announce(o, model, text, totals.threads, say);

    const std::shared_ptr<agent::ProcessGroupLink> link = join_process_group(o);  // null for one process
    const std::unique_ptr<agent::Agent> agent_holder = start_agent(o, text.size(), model, link, say);
    agent::Agent& agent = *agent_holder;
    install_setup_signals(agent.telemetry_file());  // the file exists, its header does not yet
    if (o.config.run_calibration) {
        say(run_calibration(o, text, model, agent, totals.calibration));
    } else {
        totals.calibration = "off (config run_calibration false)";
        say("calibration: " + totals.calibration);
    }

    agent::ReferencePrecisionRuntime runtime(agent.blocks(), std::size_t(o.config.int4_group_size));
    set_residency(o, model, runtime);
    model.set_weights_scope(o.config.weights_scope());
    model.set_compute_formats(runtime.precisions(), std::size_t(o.config.int4_group_size));
    std::unique_ptr<SnrValidation> validation;
    if (!o.snr_validation.empty()) validation = std::make_unique<SnrValidation>(o.snr_validation, o.config);
    agent.add_hint_sink(&runtime);

    TrainingLoop loop(o, text, model, agent, runtime, validation.get(), probe.get(), totals, link.get());
    loop.evaluate_before_training();
    say(format("setup %.2f s; initial eval loss %.4f", seconds_since(run_start), totals.initial_eval));
    // Only now: until here a signal keeps its default action and ends the process at once, even in
    // a set-up step that waits (the other ranks' rendezvous, an open() that blocks). Installed
    // earlier, the handler would only set a flag nobody reads before the first step.
    install_stop_signals();
    const double loop_s = loop.run();
    loop.save_checkpoint_if_asked();
    const int signal = stop_signal();
    if (signal)
        say(format("interrupted by signal %d after %lld of %lld steps", signal,
                   static_cast<long long>(totals.steps_done), static_cast<long long>(o.steps)));

    print_summary(o, agent, runtime, totals, loop_s);
    if (validation) std::cout << validation->summary() << std::flush;
    if (!o.summary_json.empty())
        write_summary_json(o, agent, runtime, totals, loop_s, seconds_since(run_start));
    if (signal) return 128 + signal;  // the shell's convention for a run a signal ended
    // Training completed, but its file lacks records a write error lost: not a clean run.
    const agent::Agent::TelemetryLoss loss = agent.telemetry_loss();
    if (loss.lost_to_errors == 0) return 0;
    std::cerr << format(
        "sp-trainer: the run completed, but %llu of %llu telemetry records were lost to write "
        "errors: exit %d\n",
        static_cast<unsigned long long>(loss.lost_to_errors), static_cast<unsigned long long>(loss.offered),
        kExitRecordsLost);
    return kExitRecordsLost;
}

}  // namespace
}  // namespace sp::trainer

int main(int argc, char** argv) {
    using namespace sp::trainer;
    const std::vector<std::string> args(argv + 1, argv + argc);
    TrainerOptions options;
    try {
        options = parse_trainer_options(args, bundled_text_path());
    } catch (const UsageError& e) {
        std::cerr << "sp-trainer: " << e.what() << "\nTry 'sp-trainer --help' for usage.\n";
        return 2;
    }
    if (options.help) {
        std::cout << usage_text("sp-trainer");
        return 0;
    }
    try {
        if (options.spawn > 0) return spawn_ranks(args, options);
        return run(options);
    } catch (const UsageError& e) {
        std::cerr << "sp-trainer: " << e.what() << "\nTry 'sp-trainer --help' for usage.\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "sp-trainer: " << e.what() << '\n';
        return 1;
    }
}
