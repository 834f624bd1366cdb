#!/usr/bin/env bash
# Runs ON the device machine (`run` tool, kind nvidia-h200), from the repo root, with
# .cache/roofline_gpu carried (bench/roofline_gpu/pack_source.sh makes it). In one call:
# records the GPU (nvidia-smi), builds llama.cpp's llama-bench with CUDA for sm_90 from the
# carried source while make_model.py writes the models, measures plain HBM read bandwidth,
# then batch-1 decode (llama-bench tg, flash attention off and on) of each model.
# Writes $OUT/results.json (+ nvidia-smi captures, run.log). Budget: about 9 minutes.
set -uo pipefail
: "${OUT:?set OUT to a folder for the results}"
SHAPES="${SHAPES:-llama-1b llama-8b llama-14b}"
REPS="${REPS:-5}"
N_GEN="${N_GEN:-128}"
DEADLINE="${DEADLINE:-500}"          # seconds after start: start no new model after this
W="${WORK:-/tmp/roofline_gpu}"
REPO="$(pwd)"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$W/models"

# 1. The GPU, as sglang-fleet's gpu_facts reads it (no UUID column: nothing to mask).
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=index,name,pci.bus_id,compute_cap,memory.total,driver_version --format=csv \
    >"$OUT/query-gpu.csv" 2>&1
{ nvcc --version; cmake --version | head -1; nproc; free -g; df -h /tmp; python3 --version; } >>"$OUT/run.log" 2>&1
log "probe done"

# 2. Models in the background (CPU + disk), one after another.
( export PYTHONPATH="$W/src/llama.cpp/gguf-py"
  while [[ ! -f "$W/src/.unpacked" ]]; do sleep 1; done
  for s in $SHAPES; do
      need=$(( $(python3 "$REPO/bench/roofline_gpu/make_model.py" --bytes "$s") + 3000000000 ))
      # Wait for the bench loop to delete benched models if the disk is short.
      while (( $(df -B1 --output=avail "$W" | tail -1) < need )) && (( $(el) < DEADLINE )); do sleep 2; done
      python3 "$REPO/bench/roofline_gpu/make_model.py" "$s" "$W/models/$s" >>"$W/models.log" 2>&1 \
          && touch "$W/models/$s/.done" && echo "[$(el)s] model $s written" >>"$OUT/run.log"
  done ) &

# 3. Build llama-bench (CUDA, sm_90 only).
mkdir -p "$W/src" && { tar -C "$W/src" -xJf .cache/roofline_gpu/llama.cpp-src.tar.xz \
    || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        .cache/roofline_gpu/llama.cpp-src.tar.xz "$W/src"; } && touch "$W/src/.unpacked"
BUILD_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
             -DGGML_CUDA_NCCL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF
             -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
             "-DLLAMA_BUILD_COMMIT=llama-cpp-python-$(cat .cache/roofline_gpu/SOURCE | awk '{print $2}')")
echo "${BUILD_FLAGS[*]}" >"$W/build_flags"
cmake -S "$W/src/llama.cpp" -B "$W/build" -G Ninja "${BUILD_FLAGS[@]}" >"$W/configure.log" 2>&1 \
    || { tail -40 "$W/configure.log" | tee -a "$OUT/run.log"; exit 1; }
log "configured; building llama-bench"
# Meanwhile the GPU is idle: plain read bandwidth.
python3 bench/roofline_gpu/read_bandwidth.py 8 >"$W/bandwidth.json" 2>>"$OUT/run.log"
log "bandwidth: $(cat "$W/bandwidth.json")"
timeout $(( DEADLINE - $(el) )) cmake --build "$W/build" --target llama-bench -j 16 >"$W/build.log" 2>&1 \
    || { tail -60 "$W/build.log" | tee -a "$OUT/run.log"; exit 1; }
BENCH="$W/build/bin/llama-bench"
log "built llama-bench ($(du -h "$BENCH" | cut -f1))"

# 4. Decode, batch 1, each model as soon as it is written.
for s in $SHAPES; do
    while [[ ! -f "$W/models/$s/.done" ]] && (( $(el) < DEADLINE )); do sleep 2; done
    if [[ ! -f "$W/models/$s/.done" ]]; then log "SKIP $s: not written by ${DEADLINE}s"; continue; fi
    if (( $(el) > DEADLINE )); then log "SKIP $s: past ${DEADLINE}s"; continue; fi
    "$BENCH" -m "$W/models/$s/model.gguf" -ngl 99 -p 0 -n "$N_GEN" -r "$REPS" -fa 0,1 -o json \
        >"$W/models/$s/bench.json" 2>"$W/models/$s/bench.err" \
        && log "bench $s done" || { log "bench $s FAILED"; tail -20 "$W/models/$s/bench.err" | tee -a "$OUT/run.log"; }
    rm -f "$W/models/$s/model.gguf"
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader >>"$OUT/run.log" 2>&1
done
tail -5 "$W/models.log" >>"$OUT/run.log" 2>/dev/null

# 5. One JSON with everything compare.py needs.
python3 - "$W" "$OUT/results.json" <<'PY'
import datetime, json, pathlib, subprocess, sys
w, out = pathlib.Path(sys.argv[1]), sys.argv[2]
res = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
       "build_flags": (w / "build_flags").read_text().strip(),
       "nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1],
       "bandwidth": None, "models": {}}
try:
    res["bandwidth"] = json.loads((w / "bandwidth.json").read_text())
except (OSError, ValueError) as exc:
    res["bandwidth_error"] = str(exc)
for d in sorted((w / "models").iterdir()):
    m = {}
    if (d / "model.json").exists():
        m["model"] = json.loads((d / "model.json").read_text())
    if (d / "bench.json").exists() and (d / "bench.json").stat().st_size:
        m["llama_bench"] = json.loads((d / "bench.json").read_text())
    res["models"][d.name] = m
pathlib.Path(out).write_text(json.dumps(res, indent=1) + "\n")
PY
log "results.json written"
