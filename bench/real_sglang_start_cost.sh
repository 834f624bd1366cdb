#!/usr/bin/env bash
# CPU cost of the real SGLang 0.5.23 on this machine's CPU, with extra environment ENV (e.g.
# OMP_NUM_THREADS=1) and extra server flags SERVER_ARGS (e.g. --sleep-on-idle): seconds and CPU-seconds
# (the server's whole process group) from start until /health_generate answers, then while it idles
# IDLE_S seconds (default 20), then for 20 requests of 64 tokens. The lab's launch (lab/real_sglang).
#   [SERVER_ARGS=...] bash bench/real_sglang_start_cost.sh /tmp/rs/bin/python /tmp/tiny-llama [ENV=value ...]
# (a venv: uv venv /tmp/rs --python 3.11 && VIRTUAL_ENV=/tmp/rs uv pip install sglang==0.5.23;
#  the model: python3 lab/real_sglang/make_tiny_model.py /tmp/tiny-llama)
set -euo pipefail
PY=$1 MODEL=$2; shift 2
REPO=$(cd "$(dirname "$0")/.." && pwd)
PORT=30222 LOG=$(mktemp)
env "$@" SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH="$REPO/lab/real_sglang" \
  setsid "$PY" -m sglang.launch_server --model-path "$MODEL" --device cpu --attention-backend torch_native \
  --max-total-tokens 8192 --port $PORT ${SERVER_ARGS:-} >"$LOG" 2>&1 &
PID=$!
SID=$(ps -o sid= -p $PID | tr -d ' ')
trap 'kill -- -$SID 2>/dev/null || true' EXIT
cpu() { ps -o cputimes= -s "$SID" | awk '{s += $1} END {print s}'; }
t0=$(date +%s.%N)
until curl -sf -o /dev/null http://127.0.0.1:$PORT/health_generate; do
  kill -0 $PID 2>/dev/null || { tail -20 "$LOG"; exit 1; }
  sleep 0.5
done
t1=$(date +%s.%N) c1=$(cpu)
sleep "${IDLE_S:-20}"
t1i=$(date +%s.%N) c1i=$(cpu)
for _ in $(seq 20); do
  curl -s http://127.0.0.1:$PORT/generate -H 'content-type: application/json' \
    -d '{"text": "hello", "sampling_params": {"max_new_tokens": 64, "ignore_eos": true}}' >/dev/null
done
t2=$(date +%s.%N) c2=$(cpu)
awk -v e="$* ${SERVER_ARGS:-}" -v a="$t0" -v b="$t1" -v bi="$t1i" -v c="$t2" -v x="$c1" -v xi="$c1i" -v y="$c2" 'BEGIN {
  printf "env [%s]: start %.1f s, %d CPU-s; idle %.0f s, %d CPU-s; 20 x 64 tokens %.1f s, %d CPU-s\n",
    e, b - a, x, bi - b, xi - x, c - bi, y - xi }'
