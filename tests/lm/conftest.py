"""Fixtures for the LM tests."""

import pytest

from _support import AppServers


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread: on a small shared CPU, OpenMP threads competing with other
    processes slow small matmuls down several-fold; results do not depend on it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def serve():
    """``serve(app) -> url``: run ``app`` under uvicorn on a free local port until the test ends."""
    servers = AppServers()
    yield servers.start
    servers.stop()


@pytest.fixture(scope="module")
def serve_module():
    """:func:`serve` for module-scoped servers."""
    servers = AppServers()
    yield servers.start
    servers.stop()
