#!/usr/bin/env bash
# The demo that `bash packaging/setup.sh demo` runs, on a build that exists: sp-trainer trains a
# byte-level GPT on CPU with the agent routing its blocks, sp-dashboard follows it live, and
# sp-ctl re-simulates the recorded run from its file at the end.
#
#   bash packaging/demo.sh BUILD_DIR [--steps N]
#
# With a display (DISPLAY or WAYLAND_DISPLAY set) the dashboard opens a window and the trainer keeps
# training until that window is closed (then it is stopped with SIGINT, which ends the run cleanly
# between two steps), so there is time to steer it from another terminal. Without a display the
# trainer runs 300 steps and the dashboard writes screenshots offscreen. --steps N (or SP_DEMO_STEPS)
# sets the length in both cases. SP_DEMO_DIR (default BUILD_DIR/demo) is where the files go;
# SP_DEMO_PORT (default 5556) is the telemetry port, the control port is the next one.
set -euo pipefail

bin=${1:?usage: demo.sh BUILD_DIR [--steps N]}
shift
steps=${SP_DEMO_STEPS:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?--steps needs a number}; shift ;;
    *) echo "demo.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$steps" ] && ! [[ "$steps" =~ ^[1-9][0-9]*$ ]]; then
  echo "demo.sh: --steps must be a positive number of steps, got '$steps'" >&2
  exit 2
fi

display=0 stopped=0
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && display=1
# With a window, "until the window is closed": more steps than anyone watches (days on CPU).
[ -z "$steps" ] && { [ "$display" = 1 ] && steps=10000000 || steps=300; }

demo=${SP_DEMO_DIR:-$bin/demo}
mkdir -p "$demo"
rm -f "$demo/run.jsonl"
trainer="$bin/app/sp-trainer/sp-trainer"
dashboard="$bin/app/sp-dashboard/sp-dashboard"
ctl="$bin/app/sp-ctl/sp-ctl"
port=${SP_DEMO_PORT:-5556}
# The default endpoints unless SP_DEMO_PORT moves them, so that sp-ctl's defaults reach the demo.
tel="tcp://127.0.0.1:$port" control="tcp://127.0.0.1:$((port + 1))"
echo
echo "== Selective Precision demo: a GPT trainer on CPU with the agent routing its blocks, watched live =="
echo "   sp-trainer: byte-level GPT on the bundled KJV text (resources/text), seed defaults; the reference"
echo "   runtime really materializes each block in its routed precision and counts bytes."
echo "   sp-dashboard follows it live over ZeroMQ ($tel)."
echo
"$trainer" --steps "$steps" --every-step-stats --telemetry "$demo/run.jsonl" \
  --telemetry-endpoint "$tel" --control-endpoint "$control" &
trainer_pid=$!
trap 'kill $trainer_pid 2>/dev/null || true' EXIT
if [ "$display" = 1 ]; then
  echo "== sp-dashboard: the trainer trains until you close the dashboard's window. Steer it meanwhile"
  echo "   from another terminal, e.g. $ctl pin --blocks 0 --precision bf16 (see README.md) =="
  "$dashboard" --connect "$tel,$control" || echo "demo.sh: sp-dashboard exited with status $?" >&2
  # The window is closed: the run ends between two steps, with its run_end record ("interrupted").
  kill -INT "$trainer_pid" 2>/dev/null && stopped=1
else
  # The policy updates every 10 steps after a 10-step warm-up (the default config).
  updates=$(( (steps - 10) / 10 ))
  [ "$updates" -gt 20 ] && updates=20
  echo "== No display (DISPLAY and WAYLAND_DISPLAY are unset): $steps steps; sp-dashboard runs offscreen"
  echo "   and writes a screenshot after $updates live updates instead of opening a window =="
  if [ "$updates" -ge 1 ]; then
    "$dashboard" -platform offscreen --connect "$tel,$control" --exit-after-updates "$updates" \
      --timeout 600 --screenshot "$demo/dashboard-live.png" ||
      echo "demo.sh: sp-dashboard exited with status $? (no live screenshot)" >&2
  fi
fi
trainer_status=0
wait "$trainer_pid" || trainer_status=$?
trap - EXIT
# 130: the SIGINT above (128 + 2), the end asked for.
if [ "$trainer_status" != 0 ] && ! { [ "$stopped" = 1 ] && [ "$trainer_status" = 130 ]; }; then
  echo "demo.sh: sp-trainer exited with status $trainer_status" >&2
  exit "$trainer_status"
fi
echo
echo "== The recorded run, re-simulated offline by sp-ctl (same decisions, from the file alone) =="
"$ctl" simulate --format table --stats "$demo/run.jsonl"
if [ "$display" = 0 ]; then
  "$dashboard" -platform offscreen --replay "$demo/run.jsonl" --screenshot "$demo/dashboard-replay.png"
fi
echo
echo "Telemetry (JSONL): $demo/run.jsonl — replay it: $dashboard --replay $demo/run.jsonl"
echo "Try other thresholds offline: $ctl simulate --stats $demo/run.jsonl --config CFG.json"
echo "Policy simulator on a recorded 48-block run: $ctl simulate --format table \\"
echo "    --config resources/example/config.json --stats resources/example/stats.jsonl --calibration resources/example/calibration.json"
