#pragma once
// The small model the live suites train with sp-trainer (test_live_control, the soak): 3 blocks,
// d_model 32, 2 heads, 32-token sequences, batch 4. Quick on a loaded CI machine, real all the same.
#include <QStringList>

namespace sp::test {

inline QStringList small_model_args() {
    return {"--blocks", "3", "--d-model", "32", "--heads", "2", "--seq-len", "32", "--batch", "4"};
}

}  // namespace sp::test
