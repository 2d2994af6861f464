"""``import factrl``: what importing the package does to the process."""

import os
import subprocess
import sys


def _after_import(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    if env_value is not None:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = env_value
    code = "import os, factrl; print(os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_jax_is_told_not_to_take_the_gpu_at_first_touch() -> None:
    # On a GPU image with JAX installed, JAX's default preallocation took ~105 of 140 GiB
    # in every factrl process and torch ran out of memory (docs/benchmarks.md, GPU).
    assert _after_import(None) == "false"


def test_a_users_own_jax_setting_is_kept() -> None:
    assert _after_import("true") == "true"
