#!/usr/bin/env bash
# Set-up and entry point for a Debian 12 machine: installs what is missing, configures and builds
# through the CMake presets, then runs the demo or the tests.
#
#   bash packaging/setup.sh demo    # build, then run the demo
#   bash packaging/setup.sh test    # build, then run every test suite (CTest)
#   bash packaging/setup.sh build   # build only
# Options: --preset NAME (default: ci; see CMakePresets.json: debug, asan and tsan test their own
# set of suites), --no-install (never call apt-get).
# Idempotent: with everything installed and built it only checks and returns.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

action=build
preset=ci
install=1
while [ $# -gt 0 ]; do
  case "$1" in
    demo|test|build) action=$1 ;;
    --preset) preset=${2:?--preset needs a name}; shift ;;
    --no-install) install=0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

# Debian 12 packages the project builds, tests and packages with.
packages=(
  cmake ninja-build g++ ccache pkg-config dpkg-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  nlohmann-json3-dev libcli11-dev
  libzmq3-dev cppzmq-dev
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev
  libtorch-dev libgloo-dev
  python3-torch pybind11-dev python3-dev python3-pytest
  libopenblas0-pthread
  xvfb xauth
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$install" = 1 ] && [ "$(id -u)" = 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    $cmd -qq
  else
    echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
    echo "setup.sh: install them with:  sudo apt-get update && sudo $cmd" >&2
    exit 1
  fi
fi

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

bin="build/$preset"
case "$action" in
  build) ;;
  demo)
    demo="$bin/demo"
    mkdir -p "$demo"
    rm -f "$demo/run.jsonl"
    trainer="$bin/app/sp-trainer/sp-trainer"
    dashboard="$bin/app/sp-dashboard/sp-dashboard"
    # The default endpoints, so that sp-ctl's defaults reach the demo from another terminal.
    tel="tcp://127.0.0.1:5556" ctl="tcp://127.0.0.1:5557"
    echo
    echo "== Selective Precision demo: a GPT trainer on CPU with the agent routing its blocks, watched live =="
    echo "   sp-trainer: byte-level GPT on the bundled KJV text (resources/text), 300 steps, seed defaults;"
    echo "   the reference runtime really materializes each block in its routed precision and counts bytes."
    echo "   sp-dashboard follows it live over ZeroMQ ($tel)."
    echo
    "$trainer" --steps 300 --every-step-stats --telemetry "$demo/run.jsonl" &
    trainer_pid=$!
    trap 'kill $trainer_pid 2>/dev/null || true' EXIT
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      echo "== sp-dashboard (close its window to continue; the trainer keeps running) =="
      "$dashboard" --connect "$tel,$ctl" || echo "setup.sh: sp-dashboard exited with status $?" >&2
    else
      echo "== No display (DISPLAY and WAYLAND_DISPLAY are unset): sp-dashboard runs offscreen and writes"
      echo "   a screenshot after 20 live updates instead of opening a window =="
      "$dashboard" -platform offscreen --connect "$tel,$ctl" --exit-after-updates 20 \
        --screenshot "$demo/dashboard-live.png"
    fi
    wait $trainer_pid
    trap - EXIT
    echo
    echo "== The recorded run, re-simulated offline by sp-ctl (same decisions, from the file alone) =="
    "$bin/app/sp-ctl/sp-ctl" simulate --format table --stats "$demo/run.jsonl"
    if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      "$dashboard" -platform offscreen --replay "$demo/run.jsonl" --screenshot "$demo/dashboard-replay.png"
    fi
    echo
    echo "Telemetry (JSONL): $demo/run.jsonl — replay it: $dashboard --replay $demo/run.jsonl"
    echo "Try other thresholds offline: $bin/app/sp-ctl/sp-ctl simulate --stats $demo/run.jsonl --config CFG.json"
    echo "Policy simulator on a recorded 48-block run: $bin/app/sp-ctl/sp-ctl simulate --format table \\"
    echo "    --config resources/example/config.json --stats resources/example/stats.jsonl --calibration resources/example/calibration.json"
    ;;
  test)
    export QT_QPA_PLATFORM=offscreen
    ctest --preset "$preset" -j "$(nproc)"
    ;;
esac
