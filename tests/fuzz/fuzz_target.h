#pragma once
// What every fuzz target shares. A target is one .cpp defining SP_FUZZ_ENTRY: libFuzzer's
// LLVMFuzzerTestOneInput in the `fuzz` preset, and a function of its own name (sp_fuzz_config, ...)
// when test_fuzz_regressions links every target into one ordinary executable (tests/unit).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#ifndef SP_FUZZ_ENTRY
#define SP_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

namespace sp::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// A property the target checks does not hold: say what, then stop as a crash does, so that
// libFuzzer saves the input and the regression test fails.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
    std::fflush(stderr);
    __builtin_trap();
}

}  // namespace sp::fuzz
