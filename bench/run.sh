#!/usr/bin/env bash
# One command: install the peers if missing, build bench/, run everything, write
# bench/results/latest.md.   Usage: bash bench/run.sh   (env: REPS=5 MIN_MS=25 THREADS="1 2";
# the transformer prefill step: SKIP_TRANSFORMER=1 skips it, TF_ROUNDS=2 TF_CALLS=3,
# TF_WORK=/tmp/nnc_tbench for its ~5 GB of exported ONNX models)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
NNC_BUILD_DIR=${NNC_BUILD_DIR:-$ROOT/build}
REPS=${REPS:-5}
MIN_MS=${MIN_MS:-25}
THREADS=${THREADS:-"1 2"}
MAXT=$(for t in $THREADS; do echo "$t"; done | sort -n | tail -1)

say() { echo "== $*" >&2; }

# 1. nnc itself (normally already built)
if [[ ! -x $NNC_BUILD_DIR/tools/nnc/nnc || ! -f $NNC_BUILD_DIR/runtime/libnnc_runtime.a ]]; then
  say "building nnc in $NNC_BUILD_DIR"
  cmake -S "$ROOT" -B "$NNC_BUILD_DIR" >&2
  cmake --build "$NNC_BUILD_DIR" -j"$(nproc)" --target nnc_driver nnc >&2
fi

# 2. peers from Debian
PKGS="libopenblas-dev libblis-dev libdnnl-dev libxsmm-dev libeigen3-dev"
missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [[ -n $missing ]]; then
  say "installing $missing"
  SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get install -y $missing >&2 || { $SUDO apt-get update >&2 && $SUDO apt-get install -y $missing >&2; }
fi

# 3. Python: Debian's torch, plus ONNX Runtime from PyPI in a venv that sees it
PY=/usr/bin/python3
if ! $PY -c "import torch" 2>/dev/null; then
  say "python3-torch missing: apt-get install -y python3-torch"; apt-get install -y python3-torch >&2 || true
fi
if ! $PY -c "import onnxruntime, onnx" 2>/dev/null; then
  if [[ ! -x $BENCH/.venv/bin/python ]] || ! "$BENCH/.venv/bin/python" -c "import onnxruntime, onnx" 2>/dev/null; then
    say "creating $BENCH/.venv (system site packages) with onnxruntime, onnx"
    $PY -m venv --system-site-packages "$BENCH/.venv" >&2
    "$BENCH/.venv/bin/pip" install -q onnxruntime onnx "numpy<2" >&2 || say "pip install failed: ORT will be skipped"
  fi
  PY=$BENCH/.venv/bin/python
fi

# 4. build the harness
cmake -S "$BENCH" -B "$BENCH/build" -DNNC_BUILD_DIR="$NNC_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BENCH/build" -j"$(nproc)" >&2

# 5. run
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$BENCH/results/$STAMP
mkdir -p "$OUT"
say "machine limits"
"$BENCH/build/peer_bench" --machine --threads "$MAXT" --reps "$REPS" | tee "$OUT/machine.jsonl" >&2
for T in $THREADS; do
  say "GEMM, $T thread(s)"
  OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T BLIS_NUM_THREADS=$T \
    "$BENCH/build/peer_bench" --gemm --threads "$T" --reps "$REPS" --min-ms "$MIN_MS" | tee "$OUT/gemm_t$T.jsonl" >&2
done
MODEL=$ROOT/examples/seeds/mnist.nn
mkdir -p "$OUT/mlp_data"
for T in $THREADS; do
  say "MLP end to end, nnc library vs oneDNN chain and OpenBLAS + loop, $T thread(s)"
  OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T \
    "$BENCH/build/peer_bench" --mlp --model "$MODEL" --batch 1 --batch 64 --threads "$T" --reps "$REPS" \
    --min-ms "$MIN_MS" --dump "$OUT/mlp_data" | tee "$OUT/mlp_cpp_t$T.jsonl" >&2 || say "MLP (C++) bench failed"
done
DATA=(); [[ -f $OUT/mlp_data/layers.json ]] && DATA=(--data "$OUT/mlp_data")
for T in $THREADS; do
  # one process per thread count: Debian's torch calls the system BLAS (OpenBLAS,
  # pthreads), whose thread count torch.set_num_threads does not set
  say "MLP end to end, nnc CLI vs PyTorch and ONNX Runtime, $T thread(s)"
  OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T \
    "$PY" "$BENCH/mlp_bench.py" --nnc "$NNC_BUILD_DIR/tools/nnc/nnc" --model "$MODEL" "${DATA[@]}" \
    --batch 1 64 --threads "$T" --reps "$REPS" --min-ms "$MIN_MS" | tee "$OUT/mlp_t$T.jsonl" >&2 || say "MLP bench failed"
done

if [[ ${SKIP_TRANSFORMER:-0} != 1 ]]; then
  # one process per contender and round (TinyLlama's 4.4 GB of weights, three times over,
  # would not fit next to each other); ~25 minutes on 2 cores
  say "transformer prefill (GPT-2 small, TinyLlama-1.1B shape, seq 128): nnc CLI vs PyTorch and ONNX Runtime"
  "$PY" "$BENCH/transformer_bench.py" --nnc "$NNC_BUILD_DIR/tools/nnc/nnc" --threads $THREADS \
    --rounds "${TF_ROUNDS:-2}" --calls "${TF_CALLS:-3}" --work "${TF_WORK:-/tmp/nnc_tbench}" --check \
    | tee "$OUT/transformer.jsonl" >&2 || say "transformer bench failed"
fi

{
  echo "# nnc peer benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "nnc commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\`$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' (+ uncommitted changes)'), $(nproc) CPUs, $(uname -r), reps=$REPS, loop >= ${MIN_MS} ms; load average (1/5/15 min) at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  $PY "$BENCH/report.py" "$OUT"/*.jsonl
} > "$OUT/report.md"
cp "$OUT/report.md" "$BENCH/results/latest.md"
say "wrote $BENCH/results/latest.md (raw JSON lines in $OUT)"
cat "$BENCH/results/latest.md"
