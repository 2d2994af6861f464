"""Human-readable reports of evaluation runs."""

from factrl.report.markdown import format_summary_line, metrics_markdown

__all__ = ["format_summary_line", "metrics_markdown"]
