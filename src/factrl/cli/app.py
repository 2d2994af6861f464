"""The typer application and its command groups; commands live in sibling modules."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="factrl: retrieval-augmented claim verification with RL-trained agents.",
)
index_app = typer.Typer(no_args_is_help=True, help="Build and inspect retrieval indexes.")
corpus_app = typer.Typer(no_args_is_help=True, help="Make retrieval corpora (closed corpora pooled from a dataset's evidence).")
serve_app = typer.Typer(no_args_is_help=True, help="Run HTTP servers (retriever).")
train_app = typer.Typer(no_args_is_help=True, help="Train agents (GRPO, SFT).")
score_app = typer.Typer(no_args_is_help=True, help="Score prediction files with official benchmark scorers.")
data_app = typer.Typer(no_args_is_help=True, help="Generate datasets (factworld: a seeded fictional world to verify claims in).")
app.add_typer(index_app, name="index")
app.add_typer(corpus_app, name="corpus")
app.add_typer(serve_app, name="serve")
app.add_typer(train_app, name="train")
app.add_typer(score_app, name="score")
app.add_typer(data_app, name="data")
