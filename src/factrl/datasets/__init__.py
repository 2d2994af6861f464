"""Datasets: loaders that turn each benchmark's files into Claim records.

``load_dataset("scifact", "/data/scifact", "train")`` or ``DATASETS.get(name)().load(...)``.
"""

from factrl.datasets.base import DATASETS, DatasetFormatError, DatasetLoader, LoadResult, RowError, load_dataset

__all__ = ["DATASETS", "DatasetFormatError", "DatasetLoader", "LoadResult", "RowError", "load_dataset"]
