"""Training: GRPO on TRL (multi-turn rollouts), SFT, data filtering, and the verl bridge."""
