"""Rule-based teachers: scripted LMs that write protocol-perfect trajectories from gold
data for warm-up SFT (Veri-R1's template teacher, ProFact's gold-question teacher,
Binary RAR's notes-restating teacher, HARIS's hop-by-hop teacher of both agents).

``make_teacher("veri_r1", claims, {"mode": "offline"})``
"""

from factrl.teachers.base import TEACHERS, make_teacher, teacher_env_defaults
from factrl.teachers.template import TemplateTeacher

__all__ = ["TEACHERS", "TemplateTeacher", "make_teacher", "teacher_env_defaults"]
