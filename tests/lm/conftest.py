"""Fixtures for the LM tests."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread: on a small shared CPU, OpenMP threads competing with other
    processes slow small matmuls down several-fold; results do not depend on it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
