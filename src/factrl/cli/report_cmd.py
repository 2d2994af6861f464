"""``factrl report``: one self-contained HTML page for one or more evaluation runs."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli.app import app


@app.command("report")
def report(
    run_dirs: list[Path] = typer.Argument(
        ..., help="Run directories of `factrl eval` (the first is the reference of every difference)."
    ),
    out: Path = typer.Option(Path("report.html"), "--out", help="The HTML file to write."),
    title: str = typer.Option(None, "--title", help="Page title (default: from the first run's dataset)."),
) -> None:
    """Write an HTML report: metrics side by side, confusion matrices, reliability
    diagrams and a searchable trajectory browser, in one file that needs no network."""
    from factrl.report import RunDirError, write_html_report

    try:
        path = write_html_report(run_dirs, out, title=title)
    except RunDirError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {path}")
