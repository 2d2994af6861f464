"""Helpers shared by commands: loading claims with clear errors, offline context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer


@dataclass(frozen=True)
class ClaimSelection:
    """The claims a command will use, and how many malformed rows ``--skip-bad-rows``
    skipped on the way (runs record it: a skipped row is a claim not evaluated)."""

    claims: list[Any]
    skipped_rows: int


def load_claims(
    dataset: str,
    data_dir: Path,
    split: str,
    *,
    skip_bad_rows: bool = False,
    balanced: bool = False,
    limit: int | None = None,
    ids: Path | None = None,
) -> list[Any]:
    """The claims of :func:`select_claims`."""
    return select_claims(dataset, data_dir, split, skip_bad_rows=skip_bad_rows, balanced=balanced,
                         limit=limit, ids=ids).claims


def select_claims(
    dataset: str,
    data_dir: Path,
    split: str,
    *,
    skip_bad_rows: bool = False,
    balanced: bool = False,
    limit: int | None = None,
    ids: Path | None = None,
) -> ClaimSelection:
    """Claims of a dataset split: malformed rows stop the command with file:line and
    reason (or are skipped and counted), optional id list, label interleaving, limit."""
    from factrl.datasets import DatasetFormatError, load_dataset
    from factrl.datasets.sampling import interleave_labels
    from factrl.registry import RegistryError

    try:
        loaded = load_dataset(dataset, data_dir, split, on_error="skip" if skip_bad_rows else "raise",
                              limit=None if (balanced or ids) else limit)
    except (DatasetFormatError, RegistryError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for err in loaded.errors[:5]:
        typer.echo(f"skipped: {err}", err=True)
    if loaded.errors:
        typer.echo(f"skipped {len(loaded.errors)} malformed rows", err=True)
    claims = loaded.claims
    if ids is not None:
        wanted = set(ids.read_text(encoding="utf-8-sig").split())
        claims = [c for c in claims if c.id in wanted]
    if balanced:
        claims = interleave_labels(claims)
    return ClaimSelection(claims if limit is None else claims[:limit], len(loaded.errors))


def require_claims(selection: ClaimSelection, data_dir: Path, split: str) -> None:
    """Stop with a clear error when nothing is left to run on."""
    if not selection.claims:
        skipped = f"; {selection.skipped_rows} malformed rows skipped" if selection.skipped_rows else ""
        typer.echo(f"error: no claims in {data_dir} (split {split!r}) after filters and --limit{skipped}",
                   err=True)
        raise typer.Exit(1)


def offline_context(index: Any, max_sentences: int | None = 16) -> Callable[[Any], list[Any]] | None:
    """The offline setting's context provider (cited documents' sentences) for an index."""
    if index is None:
        return None
    from factrl.envs.context import index_context

    return index_context(index, max_sentences=max_sentences)


CONTEXT_SENTENCES_HELP = ("Offline prompts: at most this many sentences of the cited documents "
                          "(the gold evidence is always added); default 16, or the shipped agent's own (6) "
                          "with --model factrl-agent; the CPU presets use 6.")


AGENT_HELP = ("The agent: a registered environment name (veri_r1 with --param mode=online|offline, haris, profact, "
              "rar, retrieve_verify, and the baselines direct, rag, decompose, react).")
METRIC_PARAM_HELP = ("A parameter of the agent's own metrics key=value (repeatable); for --agent rar: "
                     "extract=lm|sentences, judge=generate|choice, extract_max_new_tokens=N, judge_max_new_tokens=N.")
PARAM_HELP = "An agent parameter key=value, e.g. --param max_searches=2 (repeatable)."
MODEL_HELP = ("'factrl-agent' (the trained embedded agent, default), 'smollm2-base' (the untrained embedded "
              "SmolLM2), a local path, a hub id, or openai:MODEL for a model behind an "
              "OpenAI-compatible API (with --base-url for vLLM or `factrl serve lm`).")
BASE_URL_HELP = ("Base URL of the OpenAI-compatible API for --model openai:MODEL, e.g. http://127.0.0.1:8001/v1 "
                 "(the key is read from OPENAI_API_KEY).")
LM_CACHE_HELP = ("For --model openai:MODEL: a sqlite file caching the API's responses, so a re-run "
                 "sends no request (shared safely by concurrent runs).")
LM_TIMEOUT_HELP = ("For --model openai:MODEL: seconds to wait for one whole response before retrying (default 60); "
                   "a CPU server's batch of long prompts may need minutes.")
VERIFIER_HELP = ("Binary RAR (--agent rar): the model that verifies responses, extracts and judges atomic "
                 "claims (default: --model itself); same forms as --model, or 'factrl-verifier' (the trained "
                 "cross-encoder: it scores responses and judges claims; --model extracts them).")
NO_REPEAT_NGRAM_HELP = ("Repetition guard: never generate a token that repeats an N-token sequence of the same "
                        "model turn (0 = off); local models only. Stops a small model looping on one evidence id "
                        "(see docs/benchmarks.md for its measured effect).")
MODE_HELP = "Deprecated: use --param mode=online|offline (Veri-R1's setting: search, or evidence in the prompt)."
DEVICE_CHOICES = "auto (CUDA when available, else CPU; the default), cpu, cuda or cuda:N"
DTYPE_CHOICES = "auto (bfloat16 on a GPU that has it, else float32; the default), float32, bfloat16 or float16"
DEVICE_HELP = f"Where local models run: {DEVICE_CHOICES} (not for models behind an API, openai:MODEL)."
DTYPE_HELP = f"Local models' weights: {DTYPE_CHOICES}."


def device_options(device: str | None, dtype: str | None, models: list[str]) -> dict[str, str]:
    """``load_lm`` keywords for ``--device``/``--dtype``, resolved once for this machine
    (``auto`` → ``cpu`` or ``cuda:N``, ``float32`` or ``bfloat16``) before anything loads:
    a device the machine lacks, a bad GPU index or an unknown dtype is a usage error. When
    every model is behind an API the flags have nothing to act on, and giving them is a
    usage error too; then ``{}``."""
    from factrl.lm.device import DeviceError, resolve_device, resolve_dtype
    from factrl.lm.loader import remote_backend

    if all(remote_backend(m) is not None for m in models if m):
        for flag, value in (("--device", device), ("--dtype", dtype)):
            if value is not None and value.strip().lower() != "auto":
                raise typer.BadParameter(f"{', '.join(models)} runs behind an API; {flag} applies to local models",
                                         param_hint=flag)
        return {}
    try:
        resolved = resolve_device(device)
    except DeviceError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device") from None
    try:
        return {"device": resolved, "dtype": resolve_dtype(dtype, resolved)}
    except DeviceError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dtype") from None


def episode_batch_sizes(batch_size: int | None, device: str) -> tuple[int, int]:
    """``(episodes generated together, a local model's rows per forward pass)``: the
    episodes default to 16 on CPU (more only queue for its cores) and to the device's
    generation batch on CUDA; the rows are the device's default, raised to the episodes
    so that they all share one forward pass."""
    from factrl.lm.device import default_batch_size

    episodes = batch_size or (default_batch_size(device) if device.startswith("cuda") else 16)
    return episodes, max(episodes, default_batch_size(device))


def runtime_info(lm: Any) -> dict[str, Any]:
    """What a run records about where ``lm`` ran (device, dtype, rows per forward pass);
    empty for a model behind an API."""
    info = getattr(lm, "runtime_info", None)
    return dict(info()) if callable(info) else {}


def lm_options(model: str, base_url: str | None, lm_cache: Path | None = None,
               lm_timeout: float | None = None, role_models: list[str] | None = None) -> dict[str, Any]:
    """``load_lm`` keywords for ``--base-url``, ``--lm-cache`` and ``--lm-timeout``, which
    only an ``openai:MODEL`` takes (``--model`` or one of the ``--role-model`` values)."""
    flags = {"--base-url": ("base_url", base_url), "--lm-cache": ("cache", lm_cache),
             "--lm-timeout": ("timeout", lm_timeout)}
    given = {flag: kv for flag, kv in flags.items() if kv[1] is not None}
    if not given:
        return {}
    from factrl.lm.loader import remote_backend

    if remote_backend(model) is None:
        if any(remote_backend(v.partition("=")[2].strip() or "x") is not None for v in role_models or []):
            return {}  # the options are for a role's openai: model
        flag = next(iter(given))
        raise typer.BadParameter(f"{flag} needs --model openai:MODEL", param_hint=flag)
    return dict(given.values())


ROLE_MODEL_HELP = ("ROLE=MODEL: a sub-agent role played by its own model (repeatable), e.g. "
                   "--role-model searcher=openai:searcher for HARIS's search agent behind `factrl serve lm` "
                   "(--base-url, --lm-cache and --lm-timeout apply to every openai: model); other roles use --model.")


def parse_role_models(values: list[str]) -> dict[str, str]:
    """``{role: model}`` from ``--role-model ROLE=MODEL`` options; a bad value is a usage error."""
    out: dict[str, str] = {}
    for value in values:
        role, sep, model = (x.strip() for x in value.partition("="))
        if not sep or not role or not model:
            raise typer.BadParameter(f"expected ROLE=MODEL, got {value!r}", param_hint="--role-model")
        if role in out:
            raise typer.BadParameter(f"role {role!r} given twice", param_hint="--role-model")
        out[role] = model
    return out


def resolve_context_sentences(value: int | None, model: str | None, agent: str) -> int:
    """``--context-sentences`` when given; else the shipped agent's own (its manifest's,
    when ``model`` is that agent and ``agent`` its environment); else 16."""
    from factrl.components import ComponentError, context_sentences, resolve_agent

    try:
        return context_sentences(value, model, resolve_agent(agent).name)
    except ComponentError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model") from None


_MODE_WARNED: list[bool] = []


def mode_param(mode: str | None, params: list[str]) -> list[str]:
    """The deprecated ``--mode X`` as ``--param mode=X`` (an explicit ``--param mode=``
    wins), with one warning per process."""
    if mode is None:
        return list(params)
    if not _MODE_WARNED:
        _MODE_WARNED.append(True)
        typer.echo(f"warning: --mode is deprecated; use --param mode={mode}", err=True)
    if any(p.partition("=")[0].strip() == "mode" for p in params):
        return list(params)
    return [*params, f"mode={mode}"]


def agent_spec(agent: str, params: list[str], *, mode: str | None = None, defaults: dict[str, Any] | None = None) -> Any:
    """The :class:`~factrl.envs.EnvSpec` of ``--agent``/``--param`` (and the deprecated
    ``--mode``), ``defaults`` under the given parameters; a bad ``--param`` is a usage error."""
    from factrl.envs import EnvSpec, parse_params

    try:
        values = parse_params(mode_param(mode, params))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--param") from None
    return EnvSpec(name=agent, params={**(defaults or {}), **values})


# The option that sets each part of a run (components.ComponentError.part).
PART_OPTIONS = {"agent": "--agent", "reward": "--reward", "policy": "--model", "verifier": "--verifier",
                "judge": "--verifier"}


def build_run(spec: Any, **kw: Any) -> Any:
    """:func:`factrl.components.build_components`, a problem a usage error naming the
    option that set the part at fault."""
    from factrl.components import ComponentError, build_components

    try:
        return build_components(spec, **kw)
    except ComponentError as exc:
        raise typer.BadParameter(str(exc), param_hint=PART_OPTIONS.get(exc.part, "--role-model")) from None


def build_agent(
    agent: str,
    params: list[str],
    *,
    mode: str | None = None,
    index: Any = None,
    context_sentences: int | None = 16,
    model: str | None = None,
) -> tuple[Any, Callable[[], Any]]:
    """``(EnvSpec, factory)`` for ``--agent``/``--param`` over a loaded index (or None),
    for commands that run no LM (exporters); a bad name, parameter or missing dependency
    is a usage error naming it. With ``model`` the shipped agent, the parameters it was
    trained with are the defaults, so the spec recorded says what actually ran."""
    from factrl.components import ComponentError, resolve_agent
    from factrl.envs import deps_from_index, env_factory
    from factrl.registry import RegistryError

    try:
        spec = resolve_agent(agent_spec(agent, params, mode=mode), model)
    except ComponentError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model") from None
    try:
        return spec, env_factory(spec, deps_from_index(index, context_sentences=context_sentences))
    except (ValueError, RegistryError) as exc:
        hint = "" if index is not None else " (no --index was given)"
        raise typer.BadParameter(f"{exc}{hint}", param_hint="--agent") from None


def reward_params(items: list[str]) -> dict[str, Any]:
    """``--reward-param key=value`` items; a bad one is a usage error."""
    from factrl.envs import parse_params

    try:
        return parse_params(items)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--reward-param") from None


def model_loading(on_device: dict[str, str], *, max_batch_size: int | None = None, base_url: str | None = None,
                  lm_cache: Path | None = None, lm_timeout: float | None = None) -> Any:
    """The :class:`~factrl.components.ModelLoading` of ``--device``/``--dtype`` (resolved,
    :func:`device_options`) and ``--base-url``/``--lm-cache``/``--lm-timeout``."""
    from factrl.components import ModelLoading

    return ModelLoading(device=on_device.get("device"), dtype=on_device.get("dtype"),
                        max_batch_size=max_batch_size if on_device else None, base_url=base_url,
                        cache=str(lm_cache) if lm_cache is not None else None, timeout=lm_timeout)


def index_info(index: Any) -> dict[str, Any] | None:
    """What a run records about its index, so results stay comparable: the retriever,
    its parameters and the corpus checksum."""
    if index is None or not hasattr(index, "manifest"):
        return None
    m = index.manifest.model_dump(mode="json")
    return {k: m[k] for k in ("retriever", "params", "model", "corpus", "unit_sentences") if k in m}


def require_repetition_guard(lm: Any, no_repeat_ngram: int) -> None:
    """``--no-repeat-ngram`` needs a backend that applies it (a local model): say so
    before any claim runs, not as one failed episode per claim."""
    if no_repeat_ngram and not getattr(lm, "repetition_guard", False):
        raise typer.BadParameter(f"{getattr(lm, 'name', 'this model')} cannot apply it; use a local model",
                                 param_hint="--no-repeat-ngram")
