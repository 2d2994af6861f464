"""FFRR presets (``factrl train ffrr --config NAME``), kept apart from the GRPO presets."""
