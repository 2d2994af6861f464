"""Corpus: documents read from disk, split into sentences, cut into retrieval units."""

from factrl.corpus.document import Document, doc_id_from_sentence_id, sentence_id
from factrl.corpus.errors import OnError, RowError, RowFormatError, iter_json_lines
from factrl.corpus.readers import CORPUS_FORMATS, CorpusFormatError, CorpusReader, ReadReport, read_corpus
from factrl.corpus.sentences import ABBREVIATIONS, split_sentences
from factrl.corpus.units import UnitReport, make_units

__all__ = [
    "ABBREVIATIONS",
    "CORPUS_FORMATS",
    "CorpusFormatError",
    "CorpusReader",
    "Document",
    "OnError",
    "ReadReport",
    "RowError",
    "RowFormatError",
    "UnitReport",
    "doc_id_from_sentence_id",
    "iter_json_lines",
    "make_units",
    "read_corpus",
    "sentence_id",
    "split_sentences",
]
