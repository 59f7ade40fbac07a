#!/usr/bin/env bash
# Set-up and entry point for a Debian 12 machine: installs what is missing, configures and builds
# through the CMake presets, then runs the demo or the tests.
#
#   bash packaging/setup.sh demo    # build, then run the demo (packaging/demo.sh: with a display the
#                                   # trainer trains until the dashboard's window is closed; --steps N
#                                   # or SP_DEMO_STEPS sets the length)
#   bash packaging/setup.sh test    # build, then run every test suite (CTest)
#   bash packaging/setup.sh build   # build only
# Options: --preset NAME (default: ci; see CMakePresets.json: debug, asan and tsan test their own
# set of suites), --no-install (never call apt-get), --steps N (demo: the trainer's steps).
# Idempotent: with everything installed and built it only checks and returns.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

action=build
preset=ci
install=1
demo_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    demo|test|build) action=$1 ;;
    --preset) preset=${2:?--preset needs a name}; shift ;;
    --no-install) install=0 ;;
    --steps) demo_args+=(--steps "${2:?--steps needs a number}"); shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

# Debian 12 packages the project builds, tests and packages with.
packages=(
  cmake ninja-build g++ ccache pkg-config dpkg-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  nlohmann-json3-dev libcli11-dev libsimdjson-dev
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
    bash packaging/demo.sh "$bin" "${demo_args[@]}"
    ;;
  test)
    export QT_QPA_PLATFORM=offscreen
    ctest --preset "$preset" -j "$(nproc)"
    ;;
esac
