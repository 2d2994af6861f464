#!/bin/bash
# The factworld learning recipe on one GPU: shared stages (worlds, teacher, warm-up SFT),
# then the real GRPO run and its sign-flipped control in two processes side by side on
# the same GPU (each evaluates its checkpoints on the held-out world), then the report.
#
#   bash benchmarks/factworld_gpu.sh OUT_DIR [extra `factrl train factworld` options...]
#
# Environment: FACTRL (default `factrl`), PRESET (veri_r1_factworld_cpu), STEPS (GRPO
# updates, 160), MINUTES (GRPO time cap per run, 3.5), SHAPE (prompts x rollouts per
# update, 4x8), DEVICE (cuda), DTYPE (float32), CONTROL (flip_advantage; empty: none).
# Writes OUT_DIR/report.md, results.json and the logs of each process.
#
# Veri-R1 online (run on an H200, docs/benchmarks.md "Does the RL teach?"):
#   STEPS=160 MINUTES=2 bash benchmarks/factworld_gpu.sh /tmp/fwg --recipe eval_batch=256
# HARIS on 3-hop claims, 10x the CPU preset's updates per stage (dry-run on the CPU only):
#   PRESET=haris_factworld_cpu SHAPE=4x4 bash benchmarks/factworld_gpu.sh /tmp/fwh --recipe hops=3 \
#     --recipe entities=100 --recipe claims=600 --recipe heldout_claims=150 --recipe teacher_claims=300 \
#     --recipe teacher_noise=0.3 --recipe eval_batch=256 --set haris.steps_per_stage=20 --set haris.synth_limit=240
set -u
out=${1:?usage: factworld_gpu.sh OUT_DIR [options]}; shift
FACTRL=${FACTRL:-factrl}
PRESET=${PRESET:-veri_r1_factworld_cpu}
STEPS=${STEPS:-160}; MINUTES=${MINUTES:-3.5}; SHAPE=${SHAPE:-4x8}
DEVICE=${DEVICE:-cuda}; DTYPE=${DTYPE:-float32}; CONTROL=${CONTROL-flip_advantage}
p=${SHAPE%x*}; g=${SHAPE#*x}
mkdir -p "$out"
common=(--out "$out" --preset "$PRESET" --device "$DEVICE" --dtype "$DTYPE"
  --set grpo.max_steps="$STEPS" --set grpo.max_minutes="$MINUTES"
  --set grpo.prompts_per_generation="$p" --set grpo.prompts_per_update="$p" --set grpo.num_generations="$g"
  --set rollout.batch_size=$((p * g)) --set grpo.micro_batch_size="$g" "$@")
[ -n "$CONTROL" ] && common+=(--control "$CONTROL")
t0=$(date +%s)
say() { echo "[factworld_gpu +$(( $(date +%s) - t0 ))s] $*"; }
$FACTRL train factworld "${common[@]}" --stage worlds --stage teach --stage warmup > "$out/shared.log" 2>&1 \
  || { say "shared stages failed"; tail -20 "$out/shared.log"; exit 1; }
say "shared stages done"
$FACTRL train factworld "${common[@]}" --run none --stage grpo --stage eval > "$out/real.log" 2>&1 &
real=$!
if [ -n "$CONTROL" ]; then
  $FACTRL train factworld "${common[@]}" --run "$CONTROL" --stage grpo --stage eval > "$out/control.log" 2>&1 &
  ctl=$!
  wait $ctl; say "control rc=$?"
fi
wait $real; rc=$?; say "real rc=$rc"
$FACTRL train factworld "${common[@]}" --stage report > "$out/report.log" 2>&1; say "report rc=$?"
for f in shared real control; do [ -f "$out/$f.log" ] && { echo "== $f.log"; grep -v -E "it/s\]|s/it\]|Warning|warn" "$out/$f.log" | tail -6 | cut -c1-300; }; done
[ -f "$out/report.md" ] && cat "$out/report.md"
exit $rc
