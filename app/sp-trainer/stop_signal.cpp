#include "stop_signal.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstring>

namespace sp::trainer {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) {
    g_stop_signal = signal;
    ::signal(signal, SIG_DFL);  // a second Ctrl-C is for a step that never ends
}

char g_setup_file[PATH_MAX] = {};  // the telemetry file a set-up signal removes while it is empty

// Async-signal-safe: stat, unlink, signal and raise only.
void on_setup_signal(int signal) {
    struct stat st = {};
    if (g_setup_file[0] != 0 && ::stat(g_setup_file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
        ::unlink(g_setup_file);
    ::signal(signal, SIG_DFL);
    ::raise(signal);
}

}  // namespace

void install_setup_signals(const std::string& telemetry_file) {
    if (telemetry_file.empty() || telemetry_file.size() >= sizeof g_setup_file) return;
    std::memcpy(g_setup_file, telemetry_file.c_str(), telemetry_file.size() + 1);
    struct sigaction sa = {};
    sa.sa_handler = on_setup_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

void install_stop_signals() {
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // the step in flight finishes; its system calls must not fail
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() {
    return g_stop_signal;
}

}  // namespace sp::trainer
