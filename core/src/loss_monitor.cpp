#include "sp/loss_monitor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sp {
namespace {

// A loss that has barely moved has a variance near zero, and then any wobble would be "many
// standard deviations". The deviation is therefore never taken below this share of the EMA.
constexpr double kMinRelativeStddev = 1e-3;

}  // namespace

LossMonitor::LossMonitor(const Config& config)
    : alpha_(config.loss_ema_alpha),
      threshold_(config.loss_spike_zscore),
      min_history_(config.loss_min_history) {}

LossVerdict LossMonitor::observe(double loss) {
    LossVerdict v;
    v.loss = loss;
    v.ema = ema_;
    v.history = history_;
    if (!std::isfinite(loss)) {
        v.kind = LossVerdict::Kind::nonfinite;
        v.stddev = std::sqrt(variance_);
        return v;  // a NaN would poison both averages for good
    }
    if (history_ == 0) {
        ema_ = loss;
        variance_ = 0.0;
        history_ = 1;
        v.kind = LossVerdict::Kind::learning;  // loss_min_history >= 1: the first loss never counts
        return v;
    }
    const double stddev = std::max(std::sqrt(variance_), kMinRelativeStddev * std::fabs(ema_));
    v.stddev = stddev;
    v.z =
        stddev > 0.0 ? (loss - ema_) / stddev : (loss > ema_ ? std::numeric_limits<double>::infinity() : 0.0);
    const bool armed = history_ >= min_history_;
    const bool spike = armed && v.z > threshold_;
    v.kind = !armed  ? LossVerdict::Kind::learning
             : spike ? LossVerdict::Kind::spike
                     : LossVerdict::Kind::normal;
    // A spike enters the averages clipped to the threshold: it must not teach the monitor that
    // spikes are normal, yet a lasting shift of the level still gets absorbed, step by step.
    const double absorbed = spike ? ema_ + threshold_ * stddev : loss;
    const double diff = absorbed - ema_;
    ema_ += alpha_ * diff;
    variance_ = (1.0 - alpha_) * (variance_ + alpha_ * diff * diff);
    ++history_;
    return v;
}

}  // namespace sp
