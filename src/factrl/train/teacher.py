"""Old import path of :mod:`factrl.teachers` (the Veri-R1 template teacher and the
teachers' registry), kept for code written against it."""

from factrl.teachers.base import TEACHERS, make_teacher
from factrl.teachers.template import TemplateTeacher

__all__ = ["TEACHERS", "TemplateTeacher", "make_teacher"]
