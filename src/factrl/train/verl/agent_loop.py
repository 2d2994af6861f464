"""A verl agent loop that runs a factrl environment (Veri-R1 by default) inside verl's
multi-turn rollout. Importing this module needs verl (``verl.experimental.agent_loop``).

Registered as ``factrl_env``; verl workers find it through an agent-loop config file
(see ``examples/agent_loop.yaml``)::

    - name: factrl_env
      _target_: factrl.train.verl.agent_loop.FactrlEnvAgentLoop
      env: veri_r1
      retriever_url: http://127.0.0.1:8000

For every sample the loop rebuilds the claim from the row (``extra_info.claim`` written by
``factrl export verl``, or the Veri-R1 authors' columns), builds the environment, and
hands the episode to :func:`~factrl.train.verl.episode.run_token_episode`, which keeps
factrl's token discipline (sampled ids mask 1, observation ids mask 0, nothing
re-tokenised). The model's own text goes to the reward function through
``extra_fields`` (verl merges them into ``extra_info``); with ``score_in_loop`` the loop
sets ``reward_score`` itself from the environment's reward and verl skips the reward
function. The samples a worker runs at once are scored together (one reward call per
batch, :class:`~factrl.train.verl.batch.ScoreBatcher`).

Roles: the policy's turns go to verl's rollout server. An environment with other roles
(HARIS's ``searcher``, ProFact's search contexts) needs ``lms``, role → the model that
plays it: a model name or directory (a frozen factrl LM, loaded once per process, its
rows batched across samples) or ``policy`` (the rollout server plays it too). A role
without one is refused with :class:`~factrl.train.verl.roles.RoleError`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from factrl.envs import DEFAULT_AGENT, ENVS, Env, EnvDeps, EnvSpec, build
from factrl.envs.base import POLICY, check_trained_temperatures
from factrl.episode import GenerateRequest
from factrl.train.verl.batch import ScoreBatcher, loop_shared
from factrl.train.verl.episode import Sampled, TokenBudget, agent_loop_fields, run_token_episode, shared_retriever
from factrl.train.verl.export import claim_from_row, context_from_row
from factrl.train.verl.reward import MODEL_TEXT_KEY, score_fields
from factrl.train.verl.roles import POLICY_SERVER, TokenSide, check_roles, lm_side, shared_lm
from factrl.types import Message

__all__ = ["AGENT_NAME", "FactrlEnvAgentLoop", "stop_params"]

log = logging.getLogger(__name__)
AGENT_NAME = "factrl_env"
_warned_mismatch: list[str] = []


def stop_params(backend: str, stop: tuple[str, ...]) -> dict[str, Any]:
    """Stop strings in the rollout server's terms, keeping the stop string in the output:
    the environment reads the trailing ``</search>`` to know a search was asked for."""
    params: dict[str, Any] = {"stop": list(stop)}
    if backend == "sglang":
        params["no_stop_trim"] = True
    else:  # vLLM and TensorRT-LLM name it the same way
        params["include_stop_str_in_output"] = True
    return params


def _plain(value: Any) -> Any:
    """Hydra hands nested YAML values over as DictConfig/ListConfig; make them plain."""
    if isinstance(value, Mapping) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


@register(AGENT_NAME)
class FactrlEnvAgentLoop(AgentLoopBase):
    """verl ``AgentLoopBase`` running one factrl environment episode per sample.

    Keyword arguments (from the agent-loop YAML): ``env`` (an ``ENVS`` name),
    ``retriever_url`` or ``index`` (where searches go; not needed offline), ``env_kwargs``
    (the environment's parameters, e.g. ``max_searches``; must match the export),
    ``max_turn_tokens`` (per model turn, Veri-R1: 512), ``score_in_loop``, ``reward`` and
    ``reward_params`` (default: the environment's own reward), ``lms`` (role → model, or
    ``policy``, for the environment's roles other than the policy), ``max_batch`` and
    ``batch_window`` (seconds: how long scoring and the role models wait to fill a batch).
    """

    def __init__(
        self,
        *args: Any,
        env: str = DEFAULT_AGENT,
        retriever_url: str | None = None,
        index: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        max_turn_tokens: int = 512,
        score_in_loop: bool = False,
        reward: str | None = None,
        reward_params: Mapping[str, Any] | None = None,
        lms: Mapping[str, str] | None = None,
        max_batch: int = 64,
        batch_window: float = 0.01,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        ENVS.get(env)  # fail at start-up on an unknown name, not in every rollout
        from factrl.components import resolve_agent
        from factrl.rewards import RewardSpec, build_reward

        self.reward = None if reward is None else build_reward(RewardSpec(name=reward, params=_plain(reward_params or {})))
        self.reward_key = (reward, json.dumps(_plain(reward_params or {}), sort_keys=True))
        self.role_lms = {str(k): v for k, v in _plain(lms or {}).items()}
        if POLICY in self.role_lms:
            raise ValueError(f"lms: the {POLICY!r} role is the rollout server's; name only the other roles")
        bad = {k: v for k, v in self.role_lms.items() if not isinstance(v, str) or not v}
        if bad:
            raise ValueError(f"lms: each role needs a model name or directory, or {POLICY_SERVER!r}; got {bad}")
        self.max_batch, self.batch_window = int(max_batch), float(batch_window)
        # the agent under its one registry name (an alias such as veri_r1_offline resolved)
        self.agent = resolve_agent(EnvSpec(name=env, params=_plain(env_kwargs or {})))
        self.env_name, self.env_kwargs = self.agent.name, dict(self.agent.params)
        self.retriever_url = retriever_url
        self.index = index
        self.score_in_loop = bool(score_in_loop)
        self.budget = TokenBudget(
            max_turn_tokens=int(max_turn_tokens), max_response_tokens=int(self.rollout_config.response_length)
        )
        self.backend = str(getattr(self.rollout_config, "name", "vllm"))
        if self.backend == "sglang" and getattr(self.rollout_config, "skip_tokenizer_init", False):
            # verl's vLLM server always keeps its tokenizer; SGLang follows this flag, and
            # without a tokenizer it cannot match the stop strings the episode relies on.
            raise ValueError(
                "the factrl_env agent loop stops generation at '</search>' and '</answer>'; SGLang needs "
                "actor_rollout_ref.rollout.skip_tokenizer_init=False for stop strings"
            )

    def make_env(self, sample: Mapping[str, Any], *, where: str = "sample") -> Env:
        retriever = None
        if self.retriever_url or self.index:
            retriever = shared_retriever(url=self.retriever_url or None, index=None if self.retriever_url else self.index)
        context = context_from_row(sample, where=where)
        deps = EnvDeps(retriever=retriever, context=None if context is None else (lambda _claim: context))
        env = build(self.agent, deps)
        extra = sample.get("extra_info") or {}
        if extra.get("env"):  # factrl's export recorded the environment the prompt came from
            from factrl.components import resolve_agent

            row_spec = resolve_agent(EnvSpec(name=extra["env"], params=json.loads(extra.get("env_params") or "{}")))
            row_env = build(row_spec, EnvDeps.offline_only())
            if row_env.name != env.name:
                raise ValueError(
                    f"{where}: the row was exported for {extra.get('mode') or row_spec.name} ({row_env.name!r}) but "
                    f"this agent loop runs {env.name!r}; use a loop with env: {row_env.name} (or verl's "
                    "single_turn_agent, which needs no environment)"
                )
        return env

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        where = f"sample index={kwargs.get('index')} data_source={kwargs.get('data_source')}"
        claim = claim_from_row(kwargs, where=where)
        env = self.make_env(kwargs, where=where)
        check_roles(env, self.role_lms)
        if sampling_params.get("temperature") is not None:  # every model token of the episode is trained
            check_trained_temperatures(env, list(getattr(env, "sampling", None) or {}),
                                       float(sampling_params["temperature"]))
        request_id = uuid4().hex  # one id per trajectory: the server keeps its prefix cache
        raw_prompt = [dict(m) for m in kwargs.get("raw_prompt", [])]
        mismatch = False
        opened = False

        async def tokenize_prompt(messages: list[Message]) -> list[int]:
            nonlocal mismatch, opened
            chat = [{"role": m.role, "content": m.content} for m in messages]
            first, opened = not opened, True  # only the opening context is the dataset's prompt
            if first and raw_prompt and [{"role": m.get("role"), "content": m.get("content")} for m in raw_prompt] != chat:
                # The environment is the source of truth; a differing dataset prompt means
                # the export and the agent-loop config disagree (e.g. max_searches).
                mismatch = True
                if not _warned_mismatch:  # once per worker process, not once per rollout
                    _warned_mismatch.append(where)
                    log.warning("%s: the dataset prompt differs from the environment's; using the environment's", where)
            return await self.ct_build_initial_tokens(chat)

        preempted = 0
        server_extra: dict[str, Any] = {}

        async def generate(request: GenerateRequest) -> Sampled:
            nonlocal preempted
            params = {**sampling_params, **stop_params(self.backend, request.stop), "max_tokens": request.max_new_tokens}
            if request.temperature is not None:  # the role's own (the environment's RoleSampling)
                params["temperature"] = request.temperature
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=request.context,
                                                     sampling_params=params)
            preempted += int(out.num_preempted or 0)
            # As verl's tool loop: the first call's server fields (policy version for
            # off-policy bookkeeping), then only the newest max_global_steps.
            if not server_extra:
                server_extra.update(out.extra_fields or {})
            elif (out.extra_fields or {}).get("max_global_steps"):
                server_extra["max_global_steps"] = out.extra_fields["max_global_steps"]
            return Sampled(
                token_ids=list(out.token_ids),
                logprobs=list(out.log_probs) if out.log_probs else None,
                finish_reason=out.stop_reason,
            )

        def encode(text: str) -> list[int]:
            return list(self.tokenizer.encode(text, add_special_tokens=False))

        def decode(ids: Any) -> str:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True)

        policy = TokenSide(generate=generate, tokenize_prompt=tokenize_prompt, encode=encode, decode=decode)
        temperature, top_p = sampling_params.get("temperature"), sampling_params.get("top_p")
        roles = {role: policy if source == POLICY_SERVER else
                 lm_side(shared_lm(source), temperature=1.0 if temperature is None else float(temperature),
                         top_p=1.0 if top_p is None else float(top_p), max_batch=self.max_batch,
                         window=self.batch_window)
                 for role, source in self.role_lms.items()}
        scorer = None
        if self.score_in_loop:  # one scorer per worker loop and reward: concurrent samples score together
            scorer = loop_shared(("score", self.reward_key),
                                 lambda: ScoreBatcher(self.reward, max_batch=self.max_batch, window=self.batch_window))
        traj = await run_token_episode(
            env,
            claim,
            tokenize_prompt=tokenize_prompt,
            generate=generate,
            encode=encode,
            decode=decode,
            budget=self.budget,
            roles=roles,
            score=self.score_in_loop,
            scorer=scorer,
        )
        fields = agent_loop_fields(traj, self.budget.max_response_tokens)
        if not fields["prompt_ids"]:
            # The environment could not start on this row (reset failed): a data error to
            # fix, not an empty sample to train on.
            raise RuntimeError(f"{where}: {traj.error}")
        extra: dict[str, Any] = dict(server_extra)
        extra.update(
            {
                MODEL_TEXT_KEY: traj.model_text,
                "factrl_error": traj.error or "",
                "factrl_prompt_mismatch": mismatch,
                "factrl_searches": len(traj.searches),
                "turn_scores": [],
                "tool_rewards": [],
            }
        )
        output = AgentLoopOutput(
            **fields,
            metrics={
                "generate_sequences": traj.timings.get("generate_s", 0.0),
                "tool_calls": traj.timings.get("env_s", 0.0),
                "num_preempted": preempted,
            },
            extra_fields=extra,
        )
        if self.score_in_loop:
            output.reward_score = float(traj.reward.total)
            from factrl.rewards import build_reward

            used = self.reward or build_reward(env.default_reward)
            output.extra_fields["reward_extra_info"] = score_fields(traj.reward, used.components)
        return output
