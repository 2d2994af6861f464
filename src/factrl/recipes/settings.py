"""Type checks for a recipe's settings dataclass, so a setting of the wrong type (the
CLI's ``--recipe k=v`` gives text where JSON does not parse) is refused by name when the
recipe is made, not hours later deep inside a stage."""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import Any

__all__ = ["RESUMABLE", "RESUMABLE_OVERRIDES", "changed_settings", "check_settings"]

# What a resumed recipe run may change: how and where it runs, which runs it trains, how
# many validation claims pick its checkpoint (and Binary RAR's utility early stop there,
# which only chooses) and how many short-form questions are asked (each count is
# evaluated apart), and how
# long GRPO may go on (each GRPO run records the budget it trained under in its own
# directory), and which checkpoints are evaluated (GRPO saves at the shares set when it
# runs; a share set later names only a checkpoint that was saved), not what its stages make.
RESUMABLE = ("controls", "eval_base", "eval_batch", "device", "dtype", "val_claims", "val_utility_drop",
             "short_questions", "checkpoints")
RESUMABLE_OVERRIDES = ("grpo.max_minutes",)


def changed_settings(before: dict[str, Any], now: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The settings of ``now`` that differ from those recorded ``before`` (a setting added
    since: its default), leaving out :data:`RESUMABLE` and, in ``grpo_overrides``, the keys
    of :data:`RESUMABLE_OVERRIDES`."""
    def comparable(key: str, value: Any) -> Any:
        if key == "grpo_overrides" and isinstance(value, dict):
            return {k: v for k, v in value.items() if k not in RESUMABLE_OVERRIDES}
        return value

    return [k for k in now if k not in RESUMABLE
            and comparable(k, before.get(k, defaults.get(k))) != comparable(k, now[k])]


def check_settings(obj: Any, what: str = "setting") -> None:
    """Check (and normalise, in place) every field of dataclass ``obj`` against its
    annotation: ``"None"``/``"null"`` text for an optional field is None, a list for a
    tuple field a tuple, an int for a float field a float, a number for a text field its
    text (``--recipe hops=3`` parses as JSON 3); anything else of the wrong
    type is a ``ValueError`` naming ``what`` and the field."""
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value, hint = getattr(obj, f.name), hints[f.name]
        args = typing.get_args(hint)
        optional = type(None) in args
        if optional and isinstance(value, str) and value.strip().lower() in ("none", "null"):
            setattr(obj, f.name, None)
            continue
        if value is None and optional:
            continue
        base = typing.get_origin(hint) or hint
        if optional:
            base = next(a for a in args if a is not type(None))
        if base is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(obj, f.name, str(value))
            continue
        if base is tuple and isinstance(value, (list, tuple)):
            setattr(obj, f.name, tuple(value))
            continue
        ok = {float: isinstance(value, (int, float)) and not isinstance(value, bool),
              int: isinstance(value, int) and not isinstance(value, bool),
              bool: isinstance(value, bool), str: isinstance(value, str),
              dict: isinstance(value, dict)}.get(base, True)
        if not ok:
            raise ValueError(f"{what} {f.name} must be {getattr(base, '__name__', base)}"
                             f"{' or None' if optional else ''}, got {value!r}")
        if base is float and isinstance(value, int):
            setattr(obj, f.name, float(value))
