#!/usr/bin/env bash
# Runs ON the device machine (`run` tool), from the repo root, with .cache/roofline_gpu carried
# (bench/roofline_gpu/pack_source.sh makes it). A real serving engine on a real GPU, restarted again
# and again and measured each time by sglang-fleet's own verify client (bench_client.py): the
# run-to-run noise a tune sees on a GPU host, where every candidate is a fresh server start.
# Builds llama.cpp's llama-server with CUDA (sm_90) while make_model.py writes an 8B-shaped F16
# model, then per restart: start, wait for /health, measure at concurrency 1 and 4 (REPEATS runs
# each, as verify does), stop. Writes $OUT/results.json and run.log. Budget: about 9.5 minutes.
set -uo pipefail
: "${OUT:?set OUT to a folder for the results}"
SHAPE="${SHAPE:-llama-8b}"
RESTARTS="${RESTARTS:-14}"
REPEATS="${REPEATS:-3}"
DEADLINE="${DEADLINE:-540}"          # seconds after start: no restart begins after this
W="${WORK:-/tmp/gpu_noise}"
REPO="$(pwd)"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$W/runs"
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv >"$OUT/query-gpu.csv" 2>&1

# the server's build reads tools/ui's CMakeLists (the UI itself is off), which pack_source.sh leaves out
mkdir -p "$W/src" && tar -C "$W/src" -xJf .cache/roofline_gpu/llama.cpp-src.tar.xz \
    && tar -C "$W/src" -xJf .cache/roofline_gpu/llama-ui.tar.xz || exit 1
( PYTHONPATH="$W/src/llama.cpp/gguf-py" python3 bench/roofline_gpu/make_model.py "$SHAPE" "$W/model" \
      >"$W/model.log" 2>&1 && touch "$W/model/.done" && echo "[$(el)s] model written" >>"$OUT/run.log" ) &
cmake -S "$W/src/llama.cpp" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
    >"$W/configure.log" 2>&1 || { tail -40 "$W/configure.log" | tee -a "$OUT/run.log"; exit 1; }
timeout $(( DEADLINE - $(el) )) cmake --build "$W/build" --target llama-server -j 16 >"$W/build.log" 2>&1 \
    || { tail -60 "$W/build.log" | tee -a "$OUT/run.log"; exit 1; }
SERVER="$W/build/bin/llama-server"
log "built llama-server"
while [[ ! -f "$W/model/.done" ]] && (( $(el) < DEADLINE )); do sleep 1; done
[[ -f "$W/model/.done" ]] || { log "model not written"; tail -20 "$W/model.log" | tee -a "$OUT/run.log"; exit 1; }

CLIENT="python3 $REPO/plugins/module_utils/verify/bench_client.py --base-url http://127.0.0.1:8090 --timeout 120"
for i in $(seq 1 "$RESTARTS"); do
    (( $(el) < DEADLINE )) || { log "deadline: $((i - 1)) restarts"; break; }
    "$SERVER" -m "$W/model/model.gguf" -ngl 99 -np 4 -c 8192 --host 127.0.0.1 --port 8090 >"$W/server-$i.log" 2>&1 &
    pid=$!
    python3 -c 'import time, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen("http://127.0.0.1:8090/health", timeout=2); break
    except Exception: time.sleep(0.5)' 
    $CLIENT --concurrency 1 --num-prompts 4 --input-len 128 --output-len 128 --repeats "$REPEATS" >"$W/runs/$i-c1.json" 2>>"$OUT/run.log"
    $CLIENT --concurrency 4 --num-prompts 8 --input-len 128 --output-len 128 --repeats "$REPEATS" >"$W/runs/$i-c4.json" 2>>"$OUT/run.log"
    kill "$pid"; wait "$pid" 2>/dev/null
    log "restart $i measured"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader >>"$OUT/run.log" 2>&1

python3 - "$W/runs" "$OUT/results.json" "$SHAPE" <<'PY'
import datetime, json, pathlib, sys
runs, out, shape = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
res = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "shape": shape, "restarts": []}
for i in range(1, 1000):
    c1, c4 = runs / f"{i}-c1.json", runs / f"{i}-c4.json"
    if not c1.exists():
        break
    row = {}
    for name, path in (("c1", c1), ("c4", c4)):
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            row[name] = {"error": str(exc)}
            continue
        row[name] = r
    res["restarts"].append(row)
pathlib.Path(out).write_text(json.dumps(res, indent=1) + "\n")
PY
log "results.json written"
