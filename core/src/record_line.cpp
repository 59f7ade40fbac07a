#include "sp/record_line.h"

namespace sp {

const std::string& RecordLine::line() const {
    std::lock_guard lock(mutex_);
    if (!serialized_) {
        line_ = to_json_line(record_);
        serialized_ = true;
    }
    // Never written again once serialized_, so the reference outlives the lock safely.
    return line_;
}

}  // namespace sp
