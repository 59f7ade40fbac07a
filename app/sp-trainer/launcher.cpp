// sp-trainer --spawn N: the local launcher of a data-parallel job (data_parallel.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data_parallel.h"
#include "stop_signal.h"

namespace sp::trainer {
namespace {

// A port the kernel just handed out on the loopback interface: free for the rendezvous unless
// another process grabs it in between (then rank 0 reports the bind failure).
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error(std::string("--spawn: socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    ::close(fd);
    if (!ok) throw std::runtime_error(std::string("--spawn: no free port: ") + std::strerror(errno));
    return ntohs(addr.sin_port);
}

std::string self_executable() {
    std::vector<char> path(PATH_MAX + 1, '\0');
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), PATH_MAX);
    if (n <= 0) throw std::runtime_error("--spawn: cannot find this executable (/proc/self/exe)");
    return std::string(path.data(), std::size_t(n));
}

// The command line of rank `rank`: the launcher's own flags without --spawn, plus the rank's.
std::vector<std::string> rank_arguments(const std::vector<std::string>& args, const TrainerOptions& o,
                                        int rank, int port) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--spawn") {
            ++i;  // and its value
            continue;
        }
        if (args[i].rfind("--spawn=", 0) == 0) continue;
        out.push_back(args[i]);
    }
    out.insert(out.end(), {"--world-size", std::to_string(o.spawn), "--rank", std::to_string(rank)});
    if (!o.master_port_given) out.insert(out.end(), {"--master-port", std::to_string(port)});
    return out;
}

struct Rank {
    pid_t pid = -1;
    int output = -1;      // read end of the rank's stdout + stderr
    std::string pending;  // a line not yet ended
    int status = -1;      // the exit status once reaped
};

pid_t start_rank(const std::string& exe, const std::vector<std::string>& args, int& output) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error(std::string("--spawn: pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("--spawn: fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ::close(fds[0]);
        ::close(fds[1]);
        std::vector<char*> argv{const_cast<char*>(exe.c_str())};
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(exe.c_str(), argv.data());
        std::perror("sp-trainer --spawn: exec");
        ::_exit(127);
    }
    ::close(fds[1]);
    output = fds[0];
    return pid;
}

// Copies what a rank wrote, line by line, with its prefix; false at the end of its output.
bool relay(Rank& r, int rank) {
    char buf[4096];
    const ssize_t n = ::read(r.output, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    if (n <= 0) {
        if (!r.pending.empty()) std::cout << prefix << r.pending << std::endl;
        r.pending.clear();
        return false;
    }
    r.pending.append(buf, std::size_t(n));
    for (std::size_t nl; (nl = r.pending.find('\n')) != std::string::npos; r.pending.erase(0, nl + 1))
        std::cout << prefix << r.pending.substr(0, nl) << '\n';
    std::cout.flush();
    return true;
}

int exit_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// Collects one rank that ended (waitpid `flags`); the first to fail decides the launcher's status,
// since the others fail because of it. False when none was collected.
bool reap(std::vector<Rank>& ranks, int flags, int& first_failure) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, flags);
    if (pid <= 0) return false;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i].pid != pid) continue;
        ranks[i].status = exit_code(status);
        if (ranks[i].status == 0) continue;
        std::cout << "[launcher] rank " << i << " exited with status " << ranks[i].status << std::endl;
        if (first_failure == 0) first_failure = ranks[i].status;
    }
    return true;
}

// Once a rank has failed, the others cannot finish: one stalled in a collective, or stopped
// (SIGSTOP), would keep the launcher waiting for good. They get SIGTERM (and SIGCONT, so that a
// stopped one can take it) at once, and SIGKILL after this grace period.
constexpr auto kStopGrace = std::chrono::seconds(10);

class Survivors {
  public:
    // Called on every turn of the launcher's loop.
    void stop_after_failure(const std::vector<Rank>& ranks, int first_failure) {
        if (first_failure == 0) return;
        const auto now = std::chrono::steady_clock::now();
        if (!since_) {
            since_ = now;
            if (signal_live(ranks, SIGTERM))
                std::cout << "[launcher] stopping the other ranks (SIGTERM; SIGKILL after "
                          << kStopGrace.count() << " s)" << std::endl;
        } else if (!killed_ && now - *since_ > kStopGrace) {
            killed_ = true;
            if (signal_live(ranks, SIGKILL))
                std::cout << "[launcher] killed the ranks still running after " << kStopGrace.count() << " s"
                          << std::endl;
        }
    }

  private:
    // Signals every rank not yet reaped; whether there was one.
    static bool signal_live(const std::vector<Rank>& ranks, int sig) {
        bool any = false;
        for (const Rank& r : ranks) {
            if (r.status != -1) continue;
            ::kill(r.pid, sig);
            if (sig == SIGTERM) ::kill(r.pid, SIGCONT);
            any = true;
        }
        return any;
    }

    std::optional<std::chrono::steady_clock::time_point> since_;
    bool killed_ = false;
};

}  // namespace

int spawn_ranks(const std::vector<std::string>& args, const TrainerOptions& o) {
    install_stop_signals();
    const std::string exe = self_executable();
    const int port = o.master_port_given ? o.master_port : free_port();
    std::vector<Rank> ranks(std::size_t(o.spawn));
    for (int r = 0; r < o.spawn; ++r)
        ranks[std::size_t(r)].pid =
            start_rank(exe, rank_arguments(args, o, r, port), ranks[std::size_t(r)].output);

    bool forwarded = false;
    int first_failure = 0;
    Survivors survivors;
    for (std::size_t open = ranks.size(); open > 0;) {
        if (const int sig = stop_signal(); sig && !forwarded) {  // the operator stops the whole job
            for (const Rank& r : ranks) ::kill(r.pid, sig);
            forwarded = true;
        }
        std::vector<pollfd> fds;
        for (const Rank& r : ranks)
            if (r.output >= 0) fds.push_back({r.output, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR)
            throw std::runtime_error(std::string("--spawn: poll: ") + std::strerror(errno));
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            Rank& r = ranks[i];
            if (r.output < 0) continue;
            const auto it =
                std::find_if(fds.begin(), fds.end(), [&](const pollfd& p) { return p.fd == r.output; });
            if (it == fds.end() || !(it->revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (!relay(r, int(i))) {
                ::close(r.output);
                r.output = -1;
                --open;
            }
        }
        while (reap(ranks, WNOHANG, first_failure)) {
        }
        survivors.stop_after_failure(ranks, first_failure);
    }
    while (reap(ranks, 0, first_failure)) {
    }
    return first_failure;
}

}  // namespace sp::trainer
