#!/usr/bin/env bash
# On a CUDA machine: the tutorial recipe and the bigger preset for a fixed number of steps on one GPU, the bigger
# preset again with --compile, and (when there are several GPUs) the bigger preset under torchrun on all of them.
# Each line: tokens/s, median step time, peak GPU memory, final loss. Run from anywhere:
#
#     bash bench/gpu_check.sh                      # STEPS=300 each; data: ../shared/data/tinystories-1M.txt
#     STEPS=1000 DATA=/data/TinyStories-train.txt bash bench/gpu_check.sh
#     DATA=data/ts-bpe bash bench/gpu_check.sh     # a folder made by `python -m gptcore prepare`
#
# Without a CUDA GPU it stops at once, saying so. A dry run of the script itself on the CPU (its figures mean
# nothing): DEVICE=cpu NPROC=2 STEPS=12 EXTRA="--d-model 16 --n-layer 1 --n-head 2 --d-ff 32 --context 16
# --batch-size 4" bash bench/gpu_check.sh  (EXTRA: flags added to every run, after the script's own).
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-300}
OUT=${OUT:-$(mktemp -d -t gptcore-gpu-check-XXXXXX)}
mkdir -p "$OUT"
if [[ -z "${DATA:-}" ]]; then
    DATA=../shared/data/tinystories-1M.txt
    [[ -f $DATA ]] || DATA=builtin
fi

if [[ $DEVICE == cuda ]]; then
    if ! python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
        echo "gpu_check: PyTorch sees no CUDA GPU here (torch $(python -c 'import torch; print(torch.__version__)')," \
             "CUDA build: $(python -c 'import torch; print(torch.version.cuda)')). Run it on a machine with an" \
             "NVIDIA GPU and a CUDA build of torch." >&2
        exit 2
    fi
    GPUS=$(python -c 'import torch; print(torch.cuda.device_count())')
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
else
    GPUS=${NPROC:-1}
fi
echo "data: $DATA · steps 0…$((STEPS - 1)) per run · runs in $OUT · $(python -c 'import torch; print("torch", torch.__version__)')"

# A run of `python -m gptcore train` (or torchrun with $1 processes), timed by its own meta.json.
train() {
    local name=$1 processes=$2; shift 2
    local launcher=(python -m gptcore)
    if (( processes > 1 )); then
        launcher=(torchrun --standalone --nproc_per_node="$processes" -m gptcore)
    fi
    local log="$OUT/$name.log"
    if ! "${launcher[@]}" train --data "$DATA" --out "$OUT/$name" --device "$DEVICE" --steps $((STEPS - 1)) \
            --eval-every $((STEPS - 1)) --eval-batches 10 "$@" ${EXTRA:-} >"$log" 2>&1; then
        echo "gpu_check: $name failed; the end of $log:" >&2
        tail -n 30 "$log" >&2
        return 1
    fi
    python - "$OUT/$name" "$name" <<'EOF'
import json, statistics, sys
from pathlib import Path

folder, name = Path(sys.argv[1]), sys.argv[2]
meta = json.loads((folder / "meta.json").read_text())
model = json.loads((folder / "config.json").read_text())["model"]
tc, hardware, times = meta["train_config"], meta["hardware"], meta["history"]["time"]
skip = min(10, len(times) // 2)  # warm-up (and compilation); the rare evaluations go with the median
steps = [b - a for a, b in zip(times[skip:], times[skip + 1:])]
step = statistics.median(steps)
tokens = tc["batch_size"] * model["context"]
peak = hardware.get("peak_memory")
memory = f"{peak / 2**30:5.2f} GiB/GPU" if peak is not None else "  (no CUDA memory figure)"
print(f"{name:<18} {meta['params']:>11,} params  {hardware['processes']} × {hardware['device']}, "
      f"{hardware['precision']}{', compiled' if hardware['compiled'] else ''}")
print(f"{'':<18} {tokens / step:>11,.0f} tokens/s  {1000 * step:7.1f} ms/step  {memory}  "
      f"final val loss {meta['final_val_loss']:.4f} (train {meta['history']['train_loss'][-1]:.4f})")
EOF
}

train tutorial 1 --recipe tutorial
train bigger 1 --recipe bigger
train bigger-compiled 1 --recipe bigger --compile
if (( GPUS > 1 )); then
    train "bigger-${GPUS}gpus" "$GPUS" --recipe bigger --batch-size $((64 * GPUS))
fi
echo "gpu_check: done (runs kept in $OUT)"
