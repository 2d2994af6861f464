"""Old import path of :mod:`factrl.teachers.profact` (ProFact's gold-question teacher),
kept for code written against it."""

from factrl.teachers.profact import NOT_ANSWERED, ProFactTeacher

__all__ = ["NOT_ANSWERED", "ProFactTeacher"]
