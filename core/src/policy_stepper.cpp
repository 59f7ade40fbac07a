#include "sp/policy_stepper.h"

#include <stdexcept>
#include <string>

namespace sp {

void PolicyStepper::require(bool in_order, const char* call, const char* expected) const {
    if (!in_order)
        throw std::logic_error(std::string("PolicyStepper::") + call + " out of order at step " +
                               std::to_string(step_) + ": it comes " + expected +
                               " (POLICY.md, \"Per step\")");
}

const PinExpiry& PolicyStepper::begin(std::int64_t step) {
    step_ = step;
    phase_ = Phase::commands;
    return policy_.expire_pins(step);
}

CommandOutcome PolicyStepper::apply(const Command& command) {
    require(phase_ == Phase::commands, "apply", "after begin and before the step's statistics");
    return policy_.apply(command, step_);
}

void PolicyStepper::observe(const BlockGradStats& stats) {
    require(phase_ == Phase::commands || phase_ == Phase::observing, "observe",
            "after begin and the step's commands, before update");
    phase_ = Phase::observing;
    policy_.observe(step_, stats);
}

void PolicyStepper::observe_snr(const BlockSnr& snr) {
    require(phase_ == Phase::commands || phase_ == Phase::observing, "observe_snr",
            "after begin and the step's commands, before update");
    phase_ = Phase::observing;
    policy_.observe_snr(snr);
}

void PolicyStepper::observe_loss_estimate(const BlockLossEstimate& estimate) {
    require(phase_ == Phase::commands || phase_ == Phase::observing, "observe_loss_estimate",
            "after begin and the step's commands, before update");
    phase_ = Phase::observing;
    policy_.observe_loss_estimate(estimate);
}

const UpdateRecord* PolicyStepper::update(double timestamp) {
    require(phase_ == Phase::commands || phase_ == Phase::observing, "update",
            "once per step, after its statistics");
    phase_ = Phase::updated;
    return policy_.update(step_, timestamp);
}

std::vector<PrecisionChange> PolicyStepper::adopt(const std::vector<Precision>& map,
                                                  const std::vector<Reason>& reasons) {
    require(phase_ == Phase::updated, "adopt", "after update and before the loss");
    return policy_.adopt(step_, map, reasons);
}

const LossFeedback& PolicyStepper::end(double loss) {
    // A loss is judged only after the step's update: the statistics line that carries it is what a
    // re-simulation replays, and it is written only for a step that ran its update.
    require(phase_ == Phase::updated, "end", "once per step, after update");
    phase_ = Phase::between_steps;
    return policy_.observe_loss(step_, loss);
}

}  // namespace sp
