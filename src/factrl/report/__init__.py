"""Human-readable reports of evaluation runs: markdown tables and one self-contained
HTML page (metrics side by side, confusion matrix, reliability diagram, a trajectory
browser)."""

from factrl.report.html import html_report, write_html_report
from factrl.report.markdown import format_summary_line, metrics_markdown
from factrl.runs.rundir import RunData, RunDirError, load_run

__all__ = [
    "format_summary_line",
    "metrics_markdown",
    "html_report",
    "write_html_report",
    "RunData",
    "RunDirError",
    "load_run",
]
