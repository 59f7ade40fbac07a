#!/usr/bin/env bash
# The whole trainer on a lent GPU machine (or, with --cpu, the same runs on the CPU: CI's dry run).
#
#   bash tools/gpu_checks/run_trainer_on_device.sh [--cpu] [--bus-bound] [--steps N] [--full-steps N]
#        [--bus-steps N] [--swap-slots K] [--no-kernel-checks] [--deadline S]
#   bash tools/gpu_checks/run_trainer_on_device.sh --prepare-carry   # here, before a device call
#
# 1. Builds the `device` CMake preset (agent + sp-trainer; no Qt, no ZeroMQ) into build/device:
#    against the pip LibTorch of python3 (torch.utils.cmake_prefix_path) on a GPU, against the
#    system's LibTorch with --cpu. Where the system has no nlohmann_json or CLI11, the headers come from
#    build/device-carry/include, which --prepare-carry fills on this machine (name build/device-carry
#    in the device tool's carry); where it has no simdjson, Debian's header and shared library come
#    from build/device-carry/simdjson (include/, lib/; the build tree's RPATH finds the library).
# 2. On a GPU, unless --no-kernel-checks, runs tools/gpu_checks/run_on_device.sh (the CUDA kernel
#    checks, compute-sanitizer tools listed in SANITIZERS, default memcheck; the benchmark) while
#    the trainer builds, into $OUT/kernels.
#    Then check_device_rounding (tools/rounding_check) on the device (on the CPU with --cpu): the
#    rounding of activations and gradients, done there, bit for bit against the core reference.
# 3. Runs sp-trainer with --summary-json for every row of the report, the seeds' setting first:
#    adapters streamed (bf16, int8, int4, fp8_e4m3, policy), adapters resident (bf16, int8), adapters
#    block-swapped (bf16, policy, int8, int4: each block uploaded just before its forward,
#    double-buffered on a copy stream), then full fine-tuning streamed (bf16, int8, int4, policy) and
#    block-swapped (bf16, policy, int8, int4), on a model large enough to matter on a GPU
#    (24 blocks, d_model 1024) and a small one on the CPU. --steps N (default 30 on a GPU, 20 on the
#    CPU) for adapters, --full-steps N (default 8 on a GPU, where the host re-packs every weight
#    every step; 20 on the CPU) for full. Each run gets RUN_TIMEOUT seconds (default 180), after which
#    it is stopped by SIGTERM (between steps: its summary is still written). With --deadline S no run
#    starts once S seconds have passed since the script started, so that a device call with a limit
#    still gets its report back.
#    The bus-bound rows (names bus-bound-*; with --bus-bound only these, and on the CPU after the
#    others): the setting where block-swap pays, the bus bounding the step. Adapters (only the frozen
#    base is streamed), --weight-residency block-swap with --swap-slots K (default 2), precision_scope
#    "weights" (BF16 compute, the weights stored and streamed in the format), and a batch small enough
#    that uploading a block in BF16 takes longer than computing it: the report's model at batch 1 x
#    seq 256 (per block 25 MB of BF16 weights, ~1 ms over PCIe 4 x16 and ~0.5 ms over 5.0, and
#    each step uploads 2N-1 blocks, against ~19 GFLOP of forward, recomputed forward and backward
#    per block, a fraction of a millisecond on an H100/H200), and on the CPU the small model at batch
#    1 x seq 32. Rows: bf16, int8, fp8_e4m3, int4, and the policy in budget mode at 50% and 65%
#    (config budget_target_pct), plus bus-bound-resident-bf16: the same BF16 run with the weights
#    resident, whose step is the compute alone. --bus-steps N steps each (default 20).
# 4. Writes $OUT/report.md (tools/gpu_checks/trainer_report.py) after every run: step time, the
#    statistics pass (the agent's gradient statistics) as a share of the step, the agent's overhead
#    and its share, bytes and host time per step moving the weights, and each format's speed-up over
#    BF16 in the same mode and residency (block-swap's in a table of its own); and $OUT/runs.tar.gz
#    with every summary and log.
# 5. Before the trainer runs (it takes about a minute, and a short device lease should not lose it to
#    them): the link gate, `sp-ctl gate --link cuda`, into $OUT/gate-cuda.json (run_link_gate below).
# $OUT defaults to build/device/out. Exit status: non-zero when a build, a check or a run failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
carry="$root/build/device-carry"

cpu=0 steps="" full_steps="" kernel_checks=1 deadline=0 bus_only=0 bus_steps=20 swap_slots=2
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=1 ;;
    --steps) steps=${2:?--steps needs a number}; shift ;;
    --full-steps) full_steps=${2:?--full-steps needs a number}; shift ;;
    --deadline) deadline=${2:?--deadline needs a number of seconds}; shift ;;
    --bus-bound) bus_only=1 ;;
    --bus-steps) bus_steps=${2:?--bus-steps needs a number}; shift ;;
    --swap-slots) swap_slots=${2:?--swap-slots needs a number}; shift ;;
    --no-kernel-checks) kernel_checks=0 ;;
    --prepare-carry)
      mkdir -p "$carry/include"
      cp -r /usr/include/nlohmann /usr/include/CLI "$carry/include/"
      mkdir -p "$carry/simdjson/include" "$carry/simdjson/lib"
      cp /usr/include/simdjson.h "$carry/simdjson/include/"
      cp -L /usr/lib/x86_64-linux-gnu/libsimdjson.so.* "$carry/simdjson/lib/"  # files, not links: they travel
      echo "run_trainer_on_device: nlohmann_json and CLI11 headers in $carry/include, simdjson in $carry/simdjson ($(du -sh "$carry" | cut -f1))"
      exit 0 ;;
    -h|--help) sed -n '2,/^# $OUT defaults/p' "$0"; exit 0 ;;
    *) echo "run_trainer_on_device: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

out=${OUT:-$root/build/device/out}
mkdir -p "$out/runs"
status=0

# What runs here, for the report's header.
{
  date -u '+%Y-%m-%d %H:%M UTC'
  if [ "$cpu" = 0 ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  else
    echo "CPU only (--cpu): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  fi
} > "$out/device.txt"

config=(--preset device)
if [ "$cpu" = 0 ]; then
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >> "$out/device.txt"
  config+=(-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}")
fi
[ -d "$carry/include/nlohmann" ] && config+=(-DSP_NLOHMANN_INCLUDE_DIR="$carry/include")
[ -d "$carry/include/CLI" ] && config+=(-DSP_CLI11_INCLUDE_DIR="$carry/include")
[ -f "$carry/simdjson/include/simdjson.h" ] && config+=(-DSP_SIMDJSON_DIR="$carry/simdjson")

kernels_pid=""
if [ "$cpu" = 0 ] && [ "$kernel_checks" = 1 ]; then
  # GPU work only after the build's CPU work has started; the trainer runs wait for it to end.
  OUT="$out/kernels" SANITIZERS="${SANITIZERS:-memcheck}" CUDA_ARCHS="${CUDA_ARCHS:-90}" \
    bash tools/gpu_checks/run_on_device.sh > "$out/kernels.log" 2>&1 &
  kernels_pid=$!
fi

echo "== build (cmake ${config[*]})"
build_start=$SECONDS
if ! { cmake "${config[@]}" && cmake --build --preset device -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "run_trainer_on_device: the device preset did not build (build.log)" >&2
  status=1
fi
echo "build: $((SECONDS - build_start)) s" | tee -a "$out/device.txt"

# The activations' and gradients' rounding on the device, bit for bit against the core reference.
if [ "$status" = 0 ]; then
  rounding_device=cuda
  [ "$cpu" = 1 ] && rounding_device=cpu
  if "$root/build/device/tools/rounding_check/check_device_rounding" "$rounding_device" > "$out/rounding.txt" 2>&1; then
    echo "rounding check: $(cat "$out/rounding.txt")" | tee -a "$out/device.txt"
  else
    echo "rounding check FAILED: $(cat "$out/rounding.txt")" | tee -a "$out/device.txt"; status=1
  fi
fi

if [ -n "$kernels_pid" ]; then
  if wait "$kernels_pid"; then echo "kernel checks: passed"; else echo "kernel checks: FAILED"; status=1; fi
  tail -5 "$out/kernels.log"
fi

trainer="$root/build/device/app/sp-trainer/sp-trainer"
report() {  # the report of the runs so far: a call cut short still brings back what ran
  local summaries=("$out"/runs/*.json)
  [ -e "${summaries[0]}" ] || return 0
  python3 tools/gpu_checks/trainer_report.py "$out/device.txt" "${summaries[@]}" > "$out/report.md.new" &&
    mv "$out/report.md.new" "$out/report.md"
}
# The link gate (issue 28, deliverable 4): on the device, `sp-ctl gate --link cuda` times pinned H2D of
# each format's packed payload plus the device dequantize kernel against pinned H2D of BF16, at the
# shapes of the report's model, and writes the policy file $out/gate-cuda.json (its table in
# gate-cuda.txt, both named in device.txt and so in the report). With --cpu there is no CUDA link: the
# dry run checks that `--link cuda` refuses with a named error and writes nothing, and runs the host
# gate (`--link host`) at the CPU model's shapes into $out/gate-host.json.
run_link_gate() {
  local ctl="$root/build/device/app/sp-ctl/sp-ctl"
  if [ "$deadline" -gt 0 ] && [ "$SECONDS" -ge "$deadline" ]; then
    echo "link gate: skipped, --deadline $deadline s reached" | tee -a "$out/device.txt"; return 0
  fi
  if [ "$cpu" = 0 ]; then
    if timeout -s TERM -k 30 "${GATE_TIMEOUT:-240}" "$ctl" gate --link cuda \
         --shapes 3072x1024,1024x1024,4096x1024,1024x4096,3072,1024,4096 --max-rows 16384 --repeats 7 \
         --out "$out/gate-cuda.json" > "$out/gate-cuda.txt" 2>&1; then
      { echo "link gate: sp-ctl gate --link cuda wrote gate-cuda.json:"; sed 's/^/    /' "$out/gate-cuda.txt"; } >> "$out/device.txt"
      return 0
    fi
    echo "link gate: sp-ctl gate --link cuda failed (gate-cuda.txt):" | tee -a "$out/device.txt"
    tail -5 "$out/gate-cuda.txt" | tee -a "$out/device.txt"
    return 1
  fi
  rm -f "$out/gate-cuda.json"
  local rc=0
  "$ctl" gate --link cuda --shapes 192x64,64 --out "$out/gate-cuda.json" > "$out/gate-cuda.txt" 2>&1 || rc=$?
  if [ "$rc" != 1 ] || [ -e "$out/gate-cuda.json" ] || ! grep -q -- "--link cuda" "$out/gate-cuda.txt"; then
    echo "link gate: --link cuda did not refuse as it should without a GPU (exit $rc):" | tee -a "$out/device.txt"
    tail -3 "$out/gate-cuda.txt" | tee -a "$out/device.txt"
    return 1
  fi
  echo "link gate: --link cuda refused here: $(head -1 "$out/gate-cuda.txt")" >> "$out/device.txt"
  if ! "$ctl" gate --link host --shapes 192x64,64x64,256x64,64x256,192,64,256 --max-rows 256 --repeats 3 \
       --out "$out/gate-host.json" > "$out/gate-host.txt" 2>&1; then
    echo "link gate: sp-ctl gate --link host failed (gate-host.txt)" | tee -a "$out/device.txt"
    return 1
  fi
  echo "link gate: sp-ctl gate --link host wrote gate-host.json (the CPU dry run)" >> "$out/device.txt"
}

gate_status=0  # a failed gate fails the script, but the trainer runs still run
if [ "$status" = 0 ]; then run_link_gate || gate_status=1; fi

if [ "$status" = 0 ]; then
  if [ "$cpu" = 0 ]; then
    model=(--device cuda --blocks 24 --d-model 1024 --heads 16 --seq-len 256 --batch 8)
    steps=${steps:-30} full_steps=${full_steps:-8}
  else
    model=(--device cpu --blocks 4 --d-model 64 --heads 4 --seq-len 32 --batch 4)
    steps=${steps:-20} full_steps=${full_steps:-20}
  fi
  common=(--eval-every 100000 --eval-batches 1 --no-telemetry --seed 1)
  run() {  # NAME STEPS ARGS...: one row of the report
    local name=$1 n=$2; shift 2
    if [ "$deadline" -gt 0 ] && [ "$SECONDS" -ge "$deadline" ]; then
      echo "skipped $name: --deadline $deadline s reached"; return
    fi
    local start=$SECONDS rc=0
    rm -f "$out/runs/$name.json" "$out/runs/$name.log"  # an earlier invocation's must not stand for this one
    if timeout -s TERM -k 30 "${RUN_TIMEOUT:-180}" "$trainer" "${model[@]}" "${common[@]}" --steps "$n" "$@" \
         --summary-json "$out/runs/$name.json" > "$out/runs/$name.log" 2>&1; then
      echo "ran $name ($((SECONDS - start)) s)"
    else
      rc=$?
      if [ -s "$out/runs/$name.json" ] && grep -q '"end": *"interrupted"' "$out/runs/$name.json"; then
        echo "ran $name: stopped by RUN_TIMEOUT after $((SECONDS - start)) s (its summary counts the steps done)"
      else
        echo "run $name FAILED (exit $rc after $((SECONDS - start)) s):"; tail -5 "$out/runs/$name.log"; status=1
      fi
    fi
    report || status=1
  }
  if [ "$bus_only" = 0 ]; then
    for p in bf16 int8 int4 fp8_e4m3 policy; do
      run "adapters-streamed-$p" "$steps" --finetune-mode adapters --precision "$p"
    done
    for p in bf16 int8; do
      run "adapters-resident-$p" "$steps" --finetune-mode adapters --weight-residency resident --precision "$p"
    done
    for p in bf16 policy int8 int4; do
      run "adapters-block-swap-$p" "$steps" --finetune-mode adapters --weight-residency block-swap --precision "$p"
    done
    for p in bf16 int8 int4 policy; do
      run "full-streamed-$p" "$full_steps" --finetune-mode full --precision "$p"
    done
    for p in bf16 policy int8 int4; do
      run "full-block-swap-$p" "$full_steps" --finetune-mode full --weight-residency block-swap --precision "$p"
    done
  fi
  if [ "$bus_only" = 1 ] || [ "$cpu" = 1 ]; then
    # The bus-bound rows (see the header): the same model at batch 1, block-swap, the weights scope.
    if [ "$cpu" = 0 ]; then model=(--device cuda --blocks 24 --d-model 1024 --heads 16 --seq-len 256 --batch 1)
    else model=(--device cpu --blocks 4 --d-model 64 --heads 4 --seq-len 32 --batch 1); fi
    bus=(--finetune-mode adapters --precision-scope weights)
    swap=(--weight-residency block-swap --swap-slots "$swap_slots")
    run "bus-bound-resident-bf16" "$bus_steps" "${bus[@]}" --weight-residency resident --precision bf16
    for p in bf16 int8 fp8_e4m3 int4; do
      run "bus-bound-$p" "$bus_steps" "${bus[@]}" "${swap[@]}" --precision "$p"
    done
    for target in 50 65; do
      mkdir -p "$out/configs"  # not under runs/: every JSON file there is a summary
      printf '{"mode": "budget", "budget_target_pct": %s}\n' "$target" > "$out/configs/budget$target.json"
      run "bus-bound-budget$target" "$bus_steps" "${bus[@]}" "${swap[@]}" --precision policy \
        --config "$out/configs/budget$target.json"
    done
  fi
  report || status=1
  [ -s "$out/report.md" ] && cat "$out/report.md"
fi
[ "$gate_status" = 0 ] || status=1

# At most a few files come back from a device machine: one archive for the details.
tar -czf "$out/runs.tar.gz" -C "$out" runs build.log rounding.txt $(cd "$out" && ls gate-*.txt gate-*.json 2>/dev/null) $( [ -d "$out/kernels" ] && echo kernels kernels.log ) 2>/dev/null || true
exit $status
