#pragma once
// Operator commands as the policy tests build them.
#include <utility>
#include <vector>

#include "sp/command.h"

namespace sp::test {

inline Command pin(std::vector<int> blocks, Precision p) {
    Command c;
    c.kind = Command::Kind::pin;
    c.blocks = std::move(blocks);
    c.precision = p;
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
