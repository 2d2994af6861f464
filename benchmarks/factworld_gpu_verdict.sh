#!/bin/bash
# The verdict-error recipes (docs/benchmarks.md, "A warm-up wrong only at the verdict") on
# one GPU with 10x the updates of their CPU runs, each with its sign-flipped control, side
# by side on the same GPU (one benchmarks/factworld_gpu.sh run per recipe, all at once):
#   online_g8  veri_r1_verdict_online_g8: Veri-R1 online, 3 x 8 rollouts, 250 updates (CPU 25)
#   haris_fv   haris_final_verification: HARIS on 3-hop claims, final verification trained,
#              100 reasoner and 20 search-agent updates (CPU 10 and 2), synthesis on 240 claims
#   offline    veri_r1_verdict_offline, 120 updates (CPU 12; held-out seed 505)
#   online     veri_r1_verdict_online, 3 x 4 rollouts, 120 updates
#   haris      haris_verdict, 20 updates a stage
# The first two are the recipes that meet the CPU bars; they are the default.
#
#   bash benchmarks/factworld_gpu_verdict.sh OUT_DIR [options for every run...]
#
# Environment: as factworld_gpu.sh (FACTRL, DEVICE, DTYPE), plus MINUTES (GRPO cap of each
# Veri-R1 run, 3), STAGE_MINUTES (GRPO cap of each HARIS stage, 0.75), SFT_MINUTES (cap of
# each warm-up SFT, 2.5), ONLY (a space-separated subset of the runs above; default
# "online_g8 haris_fv"). Writes OUT_DIR/RUN/ (report.md, results.json, logs) and OUT_DIR/RUN.log.
# A dry run of the paths on the CPU (minutes):
#   DEVICE=cpu bash benchmarks/factworld_gpu_verdict.sh /tmp/fgv --recipe entities=30 \
#     --recipe claims=60 --recipe heldout_claims=9 --recipe teacher_claims=12 --recipe sft_epochs=0.3 \
#     --set grpo.max_steps=1 --set haris.steps_per_stage=1 --set haris.reasoner_steps_per_stage=1 \
#     --set haris.synth_limit=4
set -u
out=${1:?usage: factworld_gpu_verdict.sh OUT_DIR [options]}; shift
here=$(cd "$(dirname "$0")" && pwd)
MINUTES=${MINUTES:-3}; STAGE_MINUTES=${STAGE_MINUTES:-0.75}; SFT_MINUTES=${SFT_MINUTES:-2.5}
ONLY=${ONLY:-online_g8 haris_fv}
# The named recipes (src/factrl/recipes/named) with GPU-sized evaluation, a cap on each
# warm-up SFT and checkpoints at 25/50/100 %; micro-batches as the recipes' (factworld_gpu.sh
# sets one group each).
gpu=(--recipe sft_max_minutes="$SFT_MINUTES" --recipe eval_batch=256 --recipe checkpoints=[0.25,0.5,1.0])
veri=("${gpu[@]}" --set grpo.micro_batch_size=6)
mkdir -p "$out"
pids=()
for run in $ONLY; do
  case $run in
    offline) PRESET=veri_r1_factworld_offline_cpu STEPS=120 MINUTES=$MINUTES SHAPE=3x4 \
        bash "$here/factworld_gpu.sh" "$out/offline" --from veri_r1_verdict_offline "${veri[@]}" "$@" \
        > "$out/offline.log" 2>&1 & ;;
    online) PRESET=veri_r1_factworld_cpu STEPS=120 MINUTES=$MINUTES SHAPE=3x4 \
        bash "$here/factworld_gpu.sh" "$out/online" --from veri_r1_verdict_online "${veri[@]}" "$@" \
        > "$out/online.log" 2>&1 & ;;
    online_g8) PRESET=veri_r1_factworld_cpu STEPS=250 MINUTES=$MINUTES SHAPE=3x8 \
        bash "$here/factworld_gpu.sh" "$out/online_g8" --from veri_r1_verdict_online_g8 "${veri[@]}" \
        --recipe checkpoints=[0.05,0.1,0.25,0.5,1.0] "$@" > "$out/online_g8.log" 2>&1 & ;;
    haris_fv) PRESET=haris_factworld_cpu STEPS=100 MINUTES=$STAGE_MINUTES SHAPE=4x4 \
        bash "$here/factworld_gpu.sh" "$out/haris_fv" --from haris_final_verification "${gpu[@]}" \
        --set haris.steps_per_stage=20 --set haris.reasoner_steps_per_stage=100 --set haris.synth_limit=240 \
        "$@" > "$out/haris_fv.log" 2>&1 & ;;
    haris) PRESET=haris_factworld_cpu STEPS=20 MINUTES=$STAGE_MINUTES SHAPE=4x4 \
        bash "$here/factworld_gpu.sh" "$out/haris" --from haris_verdict "${gpu[@]}" \
        --set haris.steps_per_stage=20 --set haris.synth_limit=240 "$@" > "$out/haris.log" 2>&1 & ;;
    *) echo "unknown run $run (online_g8, haris_fv, offline, online, haris)"; exit 2 ;;
  esac
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for run in $ONLY; do echo "===== $run"; tail -40 "$out/$run.log"; done
exit $rc
