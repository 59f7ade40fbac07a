#pragma once
// What the latest reason alone does not say: why a block sits where it is when the policy merely
// holds it there, and when it may switch again. Read from the store's history, Qt-free.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

// For a block held (reason hold) at update `update`: "held at bf16 since the pin was released at
// step 1028" when an operator's pin put it in that format and was released since, with no change
// in between; "" otherwise.
std::string holdHistory(const TelemetryStore& store, int block, std::size_t update);

// The step from which the policy may switch the block again (its last move by the policy plus the
// config's min_steps_between_switches), when that is still ahead of update `update`'s step; nullopt
// when it may switch now or the policy never moved it.
std::optional<std::int64_t> maySwitchAt(const TelemetryStore& store, int block, std::size_t update,
                                        std::int64_t min_steps_between_switches);

}  // namespace sp::ui
