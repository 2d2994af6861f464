"""factrl: retrieval-augmented claim verification with agents trained by reinforcement
learning (Veri-R1, HARIS, ProFact, FFRR, Binary RAR) in one toolkit.

``import factrl`` is light: records and labels only. Heavy backends (torch,
transformers, faiss, fastapi, trl) load inside the modules that need them.
"""

from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.types import Claim, EvidenceRef, Hit, Passage, Trajectory, Verdict

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
