#include "stop_signal.h"

#include <signal.h>

#include <csignal>

namespace sp::trainer {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) {
    g_stop_signal = signal;
    ::signal(signal, SIG_DFL);  // a second Ctrl-C is for a step that never ends
}

}  // namespace

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
