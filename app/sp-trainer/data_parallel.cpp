#include "data_parallel.h"

#if SP_TRAINER_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include <chrono>
#include <stdexcept>

#include "sp/agent/process_group_link.h"

namespace sp::trainer {

std::shared_ptr<agent::ProcessGroupLink> join_process_group(const TrainerOptions& o) {
    if (o.world_size <= 1) return nullptr;
#if !SP_TRAINER_HAVE_GLOO
    throw std::runtime_error("--world-size " + std::to_string(o.world_size) +
                             ": this sp-trainer was built against a LibTorch without c10d's Gloo headers, "
                             "so it cannot join a process group");
#else
    const auto timeout = std::chrono::milliseconds(std::int64_t(o.config.process_group_timeout_s * 1000.0));
    const std::string where = o.master_addr + ":" + std::to_string(o.master_port);
    try {
        c10d::TCPStoreOptions store_options;
        store_options.port = std::uint16_t(o.master_port);
        store_options.isServer = o.rank == 0;
        store_options.numWorkers = std::size_t(o.world_size);
        store_options.waitWorkers = true;
        store_options.timeout = timeout;
        auto store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, store_options);
        auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
        // On one machine Gloo's pairs use the loopback interface; elsewhere, the interface of this
        // host's name (GLOO_SOCKET_IFNAME chooses another).
        const bool loopback = o.master_addr == "127.0.0.1" || o.master_addr == "localhost";
        gloo->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                         : c10d::ProcessGroupGloo::createDefaultDevice());
        auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank, o.world_size, gloo);
        return std::make_shared<agent::ProcessGroupLink>(std::move(group), o.leader_control_endpoint,
                                                         timeout);
    } catch (const std::exception& e) {
        std::string cause = e.what();
        if (const auto nl = cause.find('\n'); nl != std::string::npos) cause.resize(nl);  // c10's backtrace
        throw std::runtime_error("rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
                                 ": could not join the job's process group at " + where + " within " +
                                 std::to_string(std::int64_t(o.config.process_group_timeout_s)) +
                                 " s (process_group_timeout_s): " + cause);
    }
#endif
}

}  // namespace sp::trainer
