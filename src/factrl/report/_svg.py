"""Hand-written inline SVG for the HTML report (no plotting library, nothing fetched)."""

from __future__ import annotations

from html import escape

from factrl.metrics.confidence import Calibration

__all__ = ["reliability_svg"]

_W, _H, _PAD = 300, 300, 40  # plot area and the margin around it


def _x(v: float) -> float:
    return _PAD + v * _W


def _y(v: float) -> float:
    return _PAD + (1 - v) * _H


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def reliability_svg(cal: Calibration, *, label: str) -> str:
    """A reliability diagram: per confidence bin a bar up to its accuracy, a dot at (mean
    confidence, accuracy), and the diagonal of perfect calibration. Bars are shaded by how
    many items the bin holds; each has a tooltip with its numbers."""
    most = max((b.n for b in cal.bins), default=0) or 1
    parts = [
        f'<svg class="rel" viewBox="0 0 {_W + 2 * _PAD} {_H + 2 * _PAD}" width="{_W + 2 * _PAD}" '
        f'height="{_H + 2 * _PAD}" role="img" aria-label="{escape(label)}">',
        f'<rect x="{_PAD}" y="{_PAD}" width="{_W}" height="{_H}" class="frame"/>',
    ]
    for t in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        parts.append(f'<line x1="{_x(t)}" y1="{_y(0)}" x2="{_x(t)}" y2="{_y(0) + 4}" class="axis"/>'
                     f'<text x="{_x(t)}" y="{_y(0) + 16}" class="tick" text-anchor="middle">{t:.1f}</text>')
        parts.append(f'<line x1="{_x(0) - 4}" y1="{_y(t)}" x2="{_x(0)}" y2="{_y(t)}" class="axis"/>'
                     f'<text x="{_x(0) - 7}" y="{_y(t) + 4}" class="tick" text-anchor="end">{t:.1f}</text>')
    parts.append(f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" class="diag"/>')
    for b in cal.bins:
        if b.n == 0 or b.accuracy is None or b.confidence is None:
            continue
        tip = (f"confidence ({b.lower:.2f}, {b.upper:.2f}]: {b.n} items, accuracy {b.accuracy:.3f}, "
               f"mean confidence {b.confidence:.3f}")
        opacity = 0.35 + 0.65 * b.n / most
        parts.append(
            f'<g><title>{escape(tip)}</title>'
            f'<rect x="{_x(b.lower) + 1:.1f}" y="{_y(b.accuracy):.1f}" width="{(b.upper - b.lower) * _W - 2:.1f}" '
            f'height="{b.accuracy * _H:.1f}" class="bar" fill-opacity="{opacity:.2f}"/>'
            f'<circle cx="{_x(b.confidence):.1f}" cy="{_y(b.accuracy):.1f}" r="3.5" class="dot"/></g>'
        )
    parts.append(f'<text x="{_x(0.5)}" y="{_H + 2 * _PAD - 6}" text-anchor="middle" class="lab">confidence</text>')
    parts.append(f'<text x="12" y="{_y(0.5)}" text-anchor="middle" class="lab" '
                 f'transform="rotate(-90 12 {_y(0.5)})">accuracy</text>')
    parts.append(f'<text x="{_x(0) + 6}" y="{_y(1) + 16}" class="lab">n={cal.n}  ECE={_f(cal.ece)}  '
                 f'MCE={_f(cal.mce)}</text>')
    parts.append("</svg>")
    return "".join(parts)
