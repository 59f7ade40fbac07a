#pragma once
// The policy's per-step sequence: the one both the agent and simulate() drive, so that a recorded
// run re-simulates to exactly the decisions it recorded (POLICY.md, "Per step"):
//
//   begin(step)              pins whose for_steps ended are released (rule 20)
//   apply(command) ...       the step's operator commands, in the order they were applied
//   observe(stats) ...       the step's gradient statistics, then its SNR estimates (rule 17)
//   observe_snr(snr) ...
//   observe_loss_estimate(e) ...  the step's loss-change estimates (rule 23)
//   update(timestamp)        the decision: a record on an update step (rule 3)
//   adopt(map, reasons)      a data-parallel follower takes rank 0's map (its record amended)
//   end(loss)                loss feedback: a spike or a non-finite loss (rules 13, 20)
//
// Each call checks that it comes in this order and throws std::logic_error otherwise. The drivers
// add their own I/O between the calls (events, telemetry, collectives), never a policy step of their
// own. begin() may follow any call: a step the trainer left unfinished (no loss) is simply over.
#include <cstdint>
#include <vector>

#include "sp/policy.h"

namespace sp {

class PolicyStepper {
  public:
    explicit PolicyStepper(Policy& policy) : policy_(policy) {}

    const PinExpiry& begin(std::int64_t step);
    CommandOutcome apply(const Command& command);
    void observe(const BlockGradStats& stats);
    void observe_snr(const BlockSnr& snr);
    void observe_loss_estimate(const BlockLossEstimate& estimate);
    // nullptr when the step is not an update step; the record is the policy's (Policy::update).
    const UpdateRecord* update(double timestamp);
    std::vector<PrecisionChange> adopt(const std::vector<Precision>& map, const std::vector<Reason>& reasons);
    const LossFeedback& end(double loss);

    // The step begun last; -1 before the first.
    std::int64_t step() const { return step_; }
    bool in_step() const { return phase_ != Phase::between_steps; }
    // The step has run its update (adopt and end may come; observe and update may not).
    bool updated() const { return phase_ == Phase::updated; }
    const Policy& policy() const { return policy_; }

  private:
    enum class Phase { between_steps, commands, observing, updated };
    void require(bool in_order, const char* call, const char* expected) const;

    Policy& policy_;
    Phase phase_ = Phase::between_steps;
    std::int64_t step_ = -1;
};

}  // namespace sp
