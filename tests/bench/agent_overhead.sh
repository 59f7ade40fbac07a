#!/usr/bin/env bash
# The agent's whole per-step cost as a fraction of the demo's training-step time, measured inside one
# sp-trainer run (the agent times its own work on the training thread; the trainer times its steps).
# Usage: tests/bench/agent_overhead.sh [BUILD_DIR] [extra sp-trainer flags...]
set -euo pipefail
build=${1:-build/ci}
shift || true
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/app/sp-trainer/sp-trainer" --steps 300 --quiet --telemetry "$out/run.jsonl" "$@" |
  grep -E "^  (steps|agent overhead|measured saving|eval loss)"
