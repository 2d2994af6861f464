"""Bundled run presets, one per paper setting (the paper index)."""
