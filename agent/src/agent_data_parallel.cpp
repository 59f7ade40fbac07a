// The agent in a data-parallel job (agent/PROTOCOL.md §11): rank 0 decides, every rank applies the
// same map at the same step. Per step, through the process group:
//   begin_step    broadcast  [step, command bytes, checksum of rank 0's map]  (+ the commands' bytes)
//   compute_hints all-gather the statistics packs                           (sharded mode only)
//                 broadcast  rank 0's map packet (step, checksum, precision and reason per block)
//   end_step      all-reduce the loss (its mean: what loss feedback judges on every rank)
// Each rank checks the checksum of the map it holds against rank 0's at both broadcasts and stops
// with a DistributedError naming both maps' differences when they disagree.
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "command_queue.h"
#include "sp/agent/agent.h"
#include "sp/agent/process_group_link.h"
#include "sp/distributed.h"

namespace sp::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the time of one collective to the agent's overhead figure.
class CollectiveTimer {
  public:
    explicit CollectiveTimer(double& total) : total_(total) {}
    ~CollectiveTimer() { total_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }
    CollectiveTimer(const CollectiveTimer&) = delete;
    CollectiveTimer& operator=(const CollectiveTimer&) = delete;

  private:
    double& total_;
    Clock::time_point t0_ = Clock::now();
};

constexpr std::size_t kHeaderStep = 0, kHeaderBytes = 1, kHeaderChecksum = 2, kHeaderWords = 3;

std::int64_t checksum_word(std::uint64_t checksum) {
    std::int64_t w = 0;
    std::memcpy(&w, &checksum, sizeof w);
    return w;
}

}  // namespace

void Agent::configure_data_parallel() {
    const std::shared_ptr<ProcessGroupLink>& link = options_.data_parallel;
    if (!link) return;
    StatsMode mode = StatsMode::replicated;
    parse_stats_mode(config_.distributed_stats_mode, mode);  // validated with the config
    sharded_stats_ = mode == StatsMode::sharded;
    link->set_timeout(std::chrono::milliseconds(std::int64_t(config_.process_group_timeout_s * 1000.0)));
    if (options_.server) options_.server->rank = link->rank();
    if (link->leader()) return;
    std::string why = "not_leader: rank " + std::to_string(link->rank()) +
                      " takes no commands; rank 0 decides for the whole job";
    why += link->leader_control_endpoint().empty()
               ? " (it has no control socket)"
               : ": send commands to rank 0 at " + link->leader_control_endpoint();
    commands_->refuse_all(std::move(why));
}

bool Agent::follower() const {
    return options_.data_parallel && !options_.data_parallel->leader();
}

std::vector<Agent::CommandItem> Agent::exchange_commands(std::int64_t step, std::vector<CommandItem> local) {
    ProcessGroupLink* link = options_.data_parallel.get();
    if (!link) return local;
    CollectiveTimer timer(overhead_.collectives_s);
    const std::uint64_t mine = map_checksum(policy_->precisions());
    std::string bytes;
    if (link->leader() && !local.empty()) {
        nlohmann::json commands = nlohmann::json::array();
        for (const CommandItem& item : local)
            commands.push_back({{"command", to_json(item.command)}, {"id", item.request_id}});
        bytes = commands.dump();
    }
    std::vector<std::int64_t> header(kHeaderWords);
    header[kHeaderStep] = step;
    header[kHeaderBytes] = std::int64_t(bytes.size());
    header[kHeaderChecksum] = checksum_word(mine);
    link->broadcast(header, "broadcast of the operator's commands", step);
    if (link->leader()) {
        if (!bytes.empty()) link->broadcast(bytes, "broadcast of the operator's commands", step);
        return local;
    }

    // A follower: the refusal its own queue answers with (nothing reaches it but a direct enqueue).
    for (CommandItem& item : local)
        if (item.done) item.done(CommandOutcome{false, commands_->check(item.command), {}}, step);
    // Everything rank 0 sends at this boundary is received before it is judged: a follower that
    // threw between the two broadcasts would leave rank 0 waiting out its timeout in the second
    // one, blaming the wrong collective.
    if (header[kHeaderBytes] > 0) {
        bytes.assign(std::size_t(header[kHeaderBytes]), '\0');
        link->broadcast(bytes, "broadcast of the operator's commands", step);
    }
    if (header[kHeaderStep] != step)
        throw DistributedError("rank " + std::to_string(link->rank()) + " is at step " +
                               std::to_string(step) + " but rank 0 at step " +
                               std::to_string(header[kHeaderStep]) + ": the ranks do not step together");
    if (header[kHeaderChecksum] != checksum_word(mine))
        throw DistributedError(
            "rank " + std::to_string(link->rank()) + ": at the boundary of step " + std::to_string(step) +
            " its map (checksum " + std::to_string(mine) +
            ") differs from rank 0's: the ranks' configs (force lists, mode) or the last step's "
            "loss feedback disagree. Stopping: the replicas would diverge");
    std::vector<CommandItem> received;
    if (header[kHeaderBytes] == 0) return received;
    for (const nlohmann::json& entry : nlohmann::json::parse(bytes)) {
        CommandItem item;
        std::string error;
        if (!parse_command(entry.at("command"), item.command, error))
            throw DistributedError("rank " + std::to_string(link->rank()) + ": rank 0's command at step " +
                                   std::to_string(step) + " does not parse here: " + error);
        item.request_id = entry.at("id").get<std::string>();
        received.push_back(std::move(item));
    }
    return received;
}

void Agent::share_statistics(std::int64_t step) {
    ProcessGroupLink* link = options_.data_parallel.get();
    if (!link || !sharded_stats_) return;
    CollectiveTimer timer(overhead_.collectives_s);
    const int blocks = policy_->block_count();
    const std::vector<double> all =
        link->all_gather(pack_shard_stats(stats_, blocks), "all-gather of the gradient statistics", step);
    stats_ = merge_shard_stats(all, link->world_size(), blocks);
}

void Agent::exchange_map(std::int64_t step) {
    ProcessGroupLink* link = options_.data_parallel.get();
    if (!link) return;
    CollectiveTimer timer(overhead_.collectives_s);
    MapPacket packet;
    packet.step = step;
    packet.precision = policy_->precisions();
    packet.reason = hints_.reason;
    packet.checksum = map_checksum(packet.precision);
    std::vector<std::int64_t> words = encode_map_packet(packet);
    link->broadcast(words, "broadcast of the precision map", step);
    if (link->leader()) return;

    const MapPacket leader = decode_map_packet(words, policy_->block_count());
    const std::string rank = "rank " + std::to_string(link->rank());
    if (map_checksum(leader.precision) != leader.checksum)
        throw DistributedError(rank + ": rank 0's map for step " + std::to_string(step) +
                               " arrived with a checksum that does not match it");
    const std::vector<Precision> own = policy_->precisions();
    const std::vector<PrecisionChange> adopted = stepper_->adopt(leader.precision, leader.reason);
    hints_.reason = leader.reason;
    if (!adopted.empty()) {
        std::vector<std::string> names;
        for (const AgentBlock& b : blocks_) names.push_back(b.name);
        // Each block with the format and reason it took, so that a re-simulation of this rank's file
        // adopts them at the same point of the step (sp::simulate).
        MapAdoptedPayload payload;
        payload.from_rank = 0;
        payload.to.emplace();
        payload.reasons.emplace();
        for (const PrecisionChange& c : adopted) {
            payload.blocks.push_back(c.block_id);
            payload.to->push_back(c.to);
            payload.reasons->push_back(c.reason);
        }
        // Not an error: inputs that differ by rank (the layer inputs of the SNR estimates) may tip a
        // decision; the job runs rank 0's, and the event says where this rank would have differed.
        payload.difference = describe_map_difference(own, leader.precision, names, 0);
        emit_event(step, std::move(payload));
        for (const PrecisionChange& c : adopted) log_change(step, c);
    }
    const std::uint64_t applied = map_checksum(policy_->precisions());
    if (applied != leader.checksum)
        throw DistributedError(rank + ": the map it applies at step " + std::to_string(step) + " (checksum " +
                               std::to_string(applied) + ") differs from rank 0's (checksum " +
                               std::to_string(leader.checksum) + ")");
}

double Agent::reduce_loss(double loss) {
    ProcessGroupLink* link = options_.data_parallel.get();
    if (!link) return loss;
    CollectiveTimer timer(overhead_.collectives_s);
    return link->all_reduce_mean(loss, "all-reduce of the step's loss", step_);
}

}  // namespace sp::agent
