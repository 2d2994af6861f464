#!/bin/bash
# The verdict-error recipes (docs/benchmarks.md, "A warm-up wrong only at the verdict") on
# one GPU with 10x the updates of their CPU runs: Veri-R1 offline (held-out seed 505),
# Veri-R1 online and HARIS on 3-hop claims, each with its sign-flipped control, all side
# by side on the same GPU (three benchmarks/factworld_gpu.sh runs at once).
#
#   bash benchmarks/factworld_gpu_verdict.sh OUT_DIR [options for every run...]
#
# Environment: as factworld_gpu.sh (FACTRL, DEVICE, DTYPE), plus MINUTES (GRPO cap of each
# Veri-R1 run, 3), STAGE_MINUTES (GRPO cap of each HARIS stage, 0.75), SFT_MINUTES (cap of
# each warm-up SFT, 2.5), ONLY (a space-separated subset of "offline online haris").
# Writes OUT_DIR/{offline,online,haris}/ (report.md, results.json, logs).
# A dry run of the paths on the CPU (minutes):
#   DEVICE=cpu bash benchmarks/factworld_gpu_verdict.sh /tmp/fgv --recipe entities=30 \
#     --recipe claims=60 --recipe heldout_claims=9 --recipe teacher_claims=12 --recipe sft_epochs=0.3 \
#     --set grpo.max_steps=1 --set haris.steps_per_stage=1 --set haris.synth_limit=4
set -u
out=${1:?usage: factworld_gpu_verdict.sh OUT_DIR [options]}; shift
here=$(cd "$(dirname "$0")" && pwd)
MINUTES=${MINUTES:-3}; STAGE_MINUTES=${STAGE_MINUTES:-0.75}; SFT_MINUTES=${SFT_MINUTES:-2.5}
ONLY=${ONLY:-offline online haris}
# The named recipes (src/factrl/recipes/named) with GPU-sized evaluation, a cap on each
# warm-up SFT and checkpoints at 25/50/100 %; micro-batches as the recipes' (factworld_gpu.sh
# sets one group each).
gpu=(--recipe sft_max_minutes="$SFT_MINUTES" --recipe eval_batch=256 --recipe checkpoints=[0.25,0.5,1.0])
veri=("${gpu[@]}" --set grpo.micro_batch_size=6)
mkdir -p "$out"
pids=()
for run in $ONLY; do
  case $run in
    offline) PRESET=veri_r1_factworld_offline_cpu STEPS=120 SHAPE=3x4 \
        bash "$here/factworld_gpu.sh" "$out/offline" --from veri_r1_verdict_offline "${veri[@]}" "$@" \
        > "$out/offline.log" 2>&1 & ;;
    online) PRESET=veri_r1_factworld_cpu STEPS=120 SHAPE=3x4 \
        bash "$here/factworld_gpu.sh" "$out/online" --from veri_r1_verdict_online "${veri[@]}" "$@" \
        > "$out/online.log" 2>&1 & ;;
    haris) PRESET=haris_factworld_cpu STEPS=20 MINUTES=$STAGE_MINUTES SHAPE=4x4 \
        bash "$here/factworld_gpu.sh" "$out/haris" --from haris_verdict "${gpu[@]}" \
        --set haris.steps_per_stage=20 --set haris.synth_limit=240 "$@" > "$out/haris.log" 2>&1 & ;;
    *) echo "unknown run $run (offline, online, haris)"; exit 2 ;;
  esac
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for run in $ONLY; do echo "===== $run"; tail -40 "$out/$run.log"; done
exit $rc
