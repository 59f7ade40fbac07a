#pragma once
// Operator commands as the policy tests build them.
#include <cstdint>
#include <utility>
#include <vector>

#include "sp/command.h"

namespace sp::test {

// With terms (POLICY.md rule 20): ends after `for_steps` steps (0: until released), or on a spike.
inline Command pin(std::vector<int> blocks, Precision p, std::int64_t for_steps = 0,
                   bool release_on_spike = false) {
    Command c;
    c.kind = Command::Kind::pin;
    c.blocks = std::move(blocks);
    c.precision = p;
    c.for_steps = for_steps;
    c.release_on_spike = release_on_spike;
    return c;
}

inline Command release(std::vector<int> blocks) {
    Command c;
    c.kind = Command::Kind::release;
    c.blocks = std::move(blocks);
    return c;
}

inline Command set_mode(Mode m) {
    Command c;
    c.kind = Command::Kind::set_mode;
    c.mode = m;
    return c;
}

inline Command set_budget(double target_pct) {
    Command c;
    c.kind = Command::Kind::set_budget;
    c.target_pct = target_pct;
    return c;
}

}  // namespace sp::test
