"""Datasets: loaders that turn each benchmark's files into Claim records.

``load_dataset("scifact", "/data/scifact", "train")`` or ``DATASETS.get(name)().load(...)``.
"""

from factrl.datasets.base import DATASETS, DatasetFormatError, DatasetLoader, LoadResult, RowError, load_dataset
from factrl.datasets.prepare import DataSettings, SplitMismatchError, prepare_splits

__all__ = [
    "DATASETS",
    "DataSettings",
    "DatasetFormatError",
    "DatasetLoader",
    "LoadResult",
    "RowError",
    "SplitMismatchError",
    "load_dataset",
    "prepare_splits",
]
