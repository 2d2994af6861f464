#!/usr/bin/env bash
# Veri-R1 online RL with verl (GRPO), the paper's Table 4 settings, via factrl's agent loop.
# Steps before this script: docs/cluster.md (install, build + serve the index, export data).
#
#   MODEL=Qwen/Qwen2.5-3B-Instruct TRAIN=data/train.parquet VAL=data/val.parquet \
#   AGENT_CFG=$PWD/agent_loop.yaml N_GPUS=2 bash run_veri_r1_grpo.sh [extra hydra overrides]
set -euo pipefail

: "${MODEL:?set MODEL to a model path or hub id}"
: "${TRAIN:?set TRAIN to the exported training parquet}"
: "${VAL:?set VAL to the exported validation parquet}"
: "${AGENT_CFG:?set AGENT_CFG to an absolute path of agent_loop.yaml}"
N_GPUS=${N_GPUS:-2}
NNODES=${NNODES:-1}
# The paper's PPO micro-batch (16) and log-prob micro-batch (64) are totals over 2 GPUs.
MICRO_PER_GPU=${MICRO_PER_GPU:-8}
LOGPROB_MICRO_PER_GPU=${LOGPROB_MICRO_PER_GPU:-32}

# Lengths (Veri-R1 Table 4, Search-R1 style): 512-token start, 512 per model turn,
# 768 per observation, 3 searches + 1 answer, so the response (all turns and
# observations) is at most 4 * 512 + 3 * 768 = 4352 tokens.
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    data.train_files="$TRAIN" \
    data.val_files="$VAL" \
    data.prompt_key=prompt \
    data.return_raw_chat=True \
    data.train_batch_size=256 \
    data.val_batch_size=256 \
    data.max_prompt_length=1024 \
    data.max_response_length=4352 \
    data.filter_overlong_prompts=True \
    data.truncation=error \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.285 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$MICRO_PER_GPU" \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.n=3 \
    actor_rollout_ref.rollout.temperature=0.8 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="$LOGPROB_MICRO_PER_GPU" \
    actor_rollout_ref.rollout.multi_turn.enable=True \
    actor_rollout_ref.rollout.agent.agent_loop_config_path="$AGENT_CFG" \
    actor_rollout_ref.rollout.agent.default_agent_loop=factrl_env \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="$LOGPROB_MICRO_PER_GPU" \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    reward.custom_reward_function.path=pkg://factrl.train.verl.reward \
    reward.custom_reward_function.name=compute_score \
    trainer.logger='["console"]' \
    trainer.project_name=factrl \
    trainer.experiment_name=veri_r1_online_grpo \
    trainer.n_gpus_per_node="$N_GPUS" \
    trainer.nnodes="$NNODES" \
    trainer.total_epochs=10 \
    trainer.save_freq=5 \
    trainer.test_freq=5 \
    trainer.val_before_train=True \
    "$@"
