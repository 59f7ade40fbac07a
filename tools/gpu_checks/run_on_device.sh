#!/usr/bin/env bash
# Builds and runs the CUDA gradient-statistics verification on a GPU machine: correctness checks
# (CUDA collector vs the CPU collector, >2^31 elements, no host sync in collect()), the same checks
# under compute-sanitizer memcheck, and the benchmark (48 blocks of a 1B and a 7B bf16 model).
# Needs: python3 with a CUDA build of torch (its cmake_prefix_path), nvcc, cmake (>= 3.22), a C++17
# compiler. Qt, libzmq and nlohmann_json are not needed: this builds tools/gpu_checks, not the
# whole project (whose configure needs all three). Everything written goes to $OUT (default
# build/gpu/out): check.txt, memcheck.txt, racecheck.txt, synccheck.txt,
# initcheck.txt, bench.txt, and nsys.txt when nsys is installed. SANITIZERS (default: all four)
# names the compute-sanitizer tools to run besides memcheck, which always runs.
#
# The kernels are compiled by the nvcc found first (CUDACXX, /usr/local/cuda/bin/nvcc, PATH); its
# CUDA version must be supported by the installed driver (nvidia-smi prints the highest it supports).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build/gpu}
out=${OUT:-$build/out}
mkdir -p "$out"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt" || true
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$out/device.txt"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root/tools/gpu_checks" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS}
cmake --build "$build" -j "$(nproc)"
bench="$build/bench_cuda_grad_stats"

status=0
echo "== checks" && "$bench" --check 2>&1 | tee "$out/check.txt" || status=1

if command -v compute-sanitizer >/dev/null; then
  # Without the caching allocator every tensor is its own allocation, so memcheck sees overruns
  # that would otherwise land inside a cached block. The 4 GiB case is skipped (minutes under memcheck).
  echo "== memcheck"
  SP_GPU_CHECKS_SKIP_HUGE=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    compute-sanitizer --tool memcheck --error-exitcode 3 "$bench" --check 2>&1 | tee "$out/memcheck.txt" || status=1
  # racecheck finds shared-memory hazards (a missing __syncthreads in a tree), synccheck barriers
  # reached by part of a block, initcheck reads of memory never written. Slower than memcheck.
  # initcheck serializes the work it tracks, so the no-host-wait check is skipped under it.
  for tool in ${SANITIZERS:-racecheck synccheck initcheck}; do
    [ "$tool" = memcheck ] && continue
    echo "== $tool"
    nosync=""
    [ "$tool" = initcheck ] && nosync=1
    SP_GPU_CHECKS_SKIP_HUGE=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 SP_GPU_CHECKS_SKIP_NOSYNC=$nosync \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$bench" --check 2>&1 | tee "$out/$tool.txt" || status=1
  done
else
  echo "compute-sanitizer not found: memcheck not run" | tee "$out/memcheck.txt"
fi

echo "== benchmark" && "$bench" --model "${MODEL:-all}" --runs "${RUNS:-20}" 2>&1 | tee "$out/bench.txt" || status=1

if command -v nsys >/dev/null; then
  # A trace of the 1B benchmark: the CUDA API calls made, synchronizing ones included. The collect
  # path itself makes none (cudaEventSynchronize is the benchmark's own timing).
  nsys profile -t cuda -o "$out/trace" --force-overwrite true "$bench" --model 1b --runs 5 >/dev/null 2>&1 &&
    nsys stats -r cuda_api_sum "$out/trace.nsys-rep" 2>&1 | tee "$out/nsys.txt" || true
fi
exit $status
