#pragma once
// Loss-spike detection for loss feedback (core/POLICY.md, "Loss feedback"). The monitor keeps an
// exponential moving average of the training loss and of its variance; once it has seen
// `loss_min_history` finite losses, a loss whose z-score against them exceeds `loss_spike_zscore`
// is a spike. Pure and deterministic (no clock, no randomness), so the agent and the offline
// simulator reach the same verdicts from the same losses.
#include <cstdint>

#include "sp/config.h"

namespace sp {

struct LossVerdict {
    enum class Kind : std::uint8_t {
        learning,   // not enough history yet: absorbed, never a spike
        normal,     // within the threshold
        spike,      // z > loss_spike_zscore
        nonfinite,  // NaN or infinity: not absorbed
    };
    Kind kind = Kind::learning;
    double loss = 0.0;
    // The EMA, standard deviation and z-score the loss was judged against (before absorbing it).
    double ema = 0.0;
    double stddev = 0.0;
    double z = 0.0;   // 0 while learning or for a non-finite loss
    int history = 0;  // finite losses absorbed before this one
};

class LossMonitor {
  public:
    // Reads loss_ema_alpha, loss_spike_zscore and loss_min_history from an already valid config.
    explicit LossMonitor(const Config& config);

    LossVerdict observe(double loss);

    double ema() const { return ema_; }
    double variance() const { return variance_; }
    int history() const { return history_; }

  private:
    double alpha_;
    double threshold_;
    int min_history_;
    double ema_ = 0.0;
    double variance_ = 0.0;
    int history_ = 0;
};

}  // namespace sp
