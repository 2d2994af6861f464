"""factrl: retrieval-augmented claim verification with agents trained by reinforcement
learning (Veri-R1, HARIS, ProFact, FFRR, Binary RAR) in one toolkit.

``import factrl`` is light: records and labels only. Heavy backends (torch,
transformers, faiss, fastapi, trl) load inside the modules that need them.
"""

import os

# JAX, where it is installed beside torch (GPU images often have both), takes 75 % of the
# GPU's memory the first time anything touches it (a library probing for it is enough), so
# torch then runs out of memory with most of the card unused. factrl never uses JAX: its
# processes let JAX allocate on demand unless the user chose otherwise.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from factrl.labels import Label, UnknownLabelError, normalise_label  # noqa: E402
from factrl.types import Claim, EvidenceRef, Hit, Passage, Trajectory, Verdict  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "Label",
    "UnknownLabelError",
    "normalise_label",
    "Claim",
    "EvidenceRef",
    "Hit",
    "Passage",
    "Trajectory",
    "Verdict",
    "__version__",
]
