"""Prompt templates of the baseline agents, one module per agent (Veri-R1's own prompts
stay in :mod:`factrl.envs.prompts`, word for word from the paper)."""
