#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset `fuzz`: clang, ASan, UBSan) and runs each one for
# SECONDS (default 60) on a copy of its committed corpus and regression inputs, so that CI never
# grows the repository. Prints each target's executions; exits non-zero on any finding, with the
# crash file's path in the log (see tests/fuzz/README.md for what to do with it).
#
#   bash tests/fuzz/run.sh [SECONDS]
# Environment: SP_FUZZ_JOBS (build parallelism, default 2), SP_FUZZ_TARGETS (a subset, space
# separated), SP_FUZZ_OUT (working directory, default build/fuzz/run).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds=${1:-60}
jobs=${SP_FUZZ_JOBS:-2}
read -r -a targets <<<"${SP_FUZZ_TARGETS:-fuzz_config fuzz_jsonl fuzz_protocol fuzz_simulator}"
out=${SP_FUZZ_OUT:-build/fuzz/run}

# Configure once; after that ninja re-runs CMake itself when a CMakeLists.txt changes, and builds
# nothing when everything is up to date.
[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0
summary=()
for t in "${targets[@]}"; do
    work="$out/$t"
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    # Regression inputs are seeds too: a finding that comes back shows up at once.
    find "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t" -type f ! -name '.*' \
        -exec cp -t "$work/corpus" {} +
    # 64 KiB, except: request frames are limited to 64 KiB, so the protocol target crosses that
    # limit; the simulator's work is blocks x updates, quadratic in the input's size, so 16 KiB keeps
    # every input far from -timeout under the sanitizers while still holding every kind of line.
    case "$t" in
        fuzz_protocol) max_len=65600 ;;
        fuzz_simulator) max_len=16384 ;;
        *) max_len=65536 ;;
    esac
    log="$work/log.txt"
    rc=0
    "build/fuzz/tests/fuzz/$t" -dict="tests/fuzz/dict/$t.dict" -max_total_time="$seconds" \
        -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" "$work/corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    summary+=("$(printf '%-16s %12s executions in %ss' "$t" "${execs:-?}" "$seconds")")
    echo "${summary[-1]}"
    artifacts=$(find "$work/artifacts" -type f)
    if [ "$rc" != 0 ] || [ -n "$artifacts" ] || [ -z "$execs" ]; then
        status=1
        summary[-1]+="  FINDING: $artifacts"
        echo "== $t: FINDING (exit status $rc); the end of $log:"
        tail -n 60 "$log"
        for a in $artifacts; do echo "== $t: input saved as $a"; done
    fi
done
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit $status
