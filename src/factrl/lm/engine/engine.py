"""The decode engine: static KV cache, CUDA-graph decode steps, continuous batching.

One generate call runs like this. Rows wait in a queue (identical prompts adjacent); a
batch of ``bucket`` slots shares one static KV cache. Free slots are refilled from the
queue by an eager prefill — identical prompts (a GRPO group) run once and their cache
rows are copied. Then the decode body runs ``steps_per_sync`` steps with no host work:
sample (per-row counter-based seeds, :mod:`~factrl.lm.engine.rng`), record the token and
its logprob, advance each row's stop-string automaton (:mod:`~factrl.lm.engine.stops`),
end rows on EOS, a stop string or their own budget, and feed the tokens of the rows still
live at their own positions. On CUDA those steps are one captured graph per bucket
size. After each window the host reads which rows ended, hands their slots back, and
when the queue is empty and at most half the slots are live, moves them into the
smaller bucket so a long tail does not pay for a full batch.

Same tokens and logprobs as the eager path (:class:`factrl.lm.hf.HFLM` with
``engine="off"``) up to floating-point differences in the forward pass: both choose by
:func:`~factrl.lm.engine.sampling.choose_tokens` from the same uniforms.

This module schedules (queue, slots, buckets, pools, graph capture); the slots' tensors
and the decode window's body are in :mod:`~factrl.lm.engine.pool`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from factrl.lm.base import Generation, GenerationConfig
from factrl.lm.engine.forward import prefill
from factrl.lm.engine.pool import LIVE, REASONS, STOP, SlotPool, decode_window, pow2
from factrl.lm.engine.stops import build_stop_tables, token_bytes
from factrl.lm.engine.weights import DecoderWeights

__all__ = ["DecodeEngine", "EngineStats"]


@dataclass
class EngineStats:
    """Counters of the last generate call (for benchmarks and tests)."""

    prefills: int = 0  # prompts run through prefill (unique ones)
    prefill_rows: int = 0  # rows whose cache came from a prefill or a copy
    windows: int = 0  # decode windows run (each steps_per_sync steps)
    graphs_captured: int = 0
    buckets: list[int] = field(default_factory=list)  # bucket size of each window


class DecodeEngine:
    """Fast batched decoding for a Llama-family model (see the module doc).

    ``graphs``: capture the decode window as CUDA graphs (default: on CUDA); without
    them the same body runs eagerly (CPU, tests). ``max_slots`` bounds the batch.
    """

    def __init__(
        self, model: Any, tokenizer: Any, eos_token_ids: Sequence[int], *, max_slots: int = 256,
        steps_per_sync: int = 8, graphs: bool | None = None, dtype: torch.dtype | None = None,
        min_bucket: int = 8, max_pools: int = 3, reuse_factor: int = 4,
    ) -> None:
        if max_slots < 1 or steps_per_sync < 1:
            raise ValueError("max_slots and steps_per_sync must be >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.dtype = dtype or next(model.parameters()).dtype
        self.weights = DecoderWeights(model, self.dtype)
        vocab = self.weights.vocab
        pieces = token_bytes(tokenizer, vocab)
        if pieces is None:
            raise ValueError("the decode engine needs a byte-level BPE tokenizer (stop strings are matched on token bytes)")
        self._pieces = pieces
        self.eos_mask = torch.zeros(vocab, dtype=torch.bool, device=self.device)
        self.eos_mask[[int(e) for e in eos_token_ids if 0 <= int(e) < vocab]] = True
        self.max_slots = max_slots
        self.steps_per_sync = steps_per_sync
        self.graphs = (self.device.type == "cuda") if graphs is None else graphs
        if self.graphs and self.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.min_bucket = max(1, min_bucket)
        self.max_pools = max_pools
        self.reuse_factor = reuse_factor
        self._pools: dict[tuple[int, int], SlotPool] = {}
        self._tables: dict[tuple[tuple[str, ...], ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self._single_tables: dict[tuple[str, ...], Any] = {}
        self._mempool = torch.cuda.graph_pool_handle() if self.graphs else None
        self._stream: Any = None
        self.stats = EngineStats()

    # -- public ------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], cfgs: Sequence[GenerationConfig],
                 seeds: Sequence[int]) -> list[Generation]:
        """Continue each prompt under its config (max_new_tokens >= 1, shared temperature
        and top_p, no repetition guard); ``seeds[i]`` is row ``i``'s random stream."""
        n = len(prompts)
        if not n:
            return []
        if any(c.no_repeat_ngram for c in cfgs):
            raise ValueError("the decode engine does not apply the repetition guard; use the eager path")
        if any(c.max_new_tokens < 1 for c in cfgs):
            raise ValueError("the decode engine needs max_new_tokens >= 1 on every row")
        temperature, top_p = float(cfgs[0].temperature), float(cfgs[0].top_p)
        self.stats = EngineStats()
        with torch.no_grad(), torch.autocast(self.device.type, enabled=False):
            self.weights.refresh()
            need = max(len(p) + c.max_new_tokens for p, c in zip(prompts, cfgs))
            length = max(256, pow2(need))
            pool = self._pool(length)
            # Empty slots are decoded too: a stop-set index or automaton state left by an
            # earlier call (other stop strings, larger tables) must not index this call's.
            pool.sset.zero_()
            pool.sstate.zero_()
            stop_sets = sorted({tuple(s for s in c.stop if s) for c in cfgs})
            set_index = {s: i for i, s in enumerate(stop_sets)}
            tables = self._stop_tables(tuple(stop_sets))
            key = (temperature, top_p, tuple(stop_sets))
            top = min(pool.slots, pow2(n))
            buckets = self._buckets(top)
            for b in buckets:  # capture before any slot holds state (warm-up runs touch every slot)
                self._graph(pool, b, key, tables)
            pool.done.fill_(True)
            return self._run(pool, buckets, key, tables, list(map(list, prompts)), list(cfgs), list(seeds), set_index)

    # -- scheduling ----------------------------------------------------------------------

    def _run(self, pool: SlotPool, buckets: list[int], key: tuple, tables: tuple[torch.Tensor, torch.Tensor],
             prompts: list[list[int]], cfgs: list[GenerationConfig], seeds: list[int],
             set_index: dict[tuple[str, ...], int]) -> list[Generation]:
        n = len(prompts)
        # Identical prompts adjacent (first-appearance order) so a group is prefilled once.
        first: dict[tuple[int, ...], int] = {}
        for i, p in enumerate(prompts):
            first.setdefault(tuple(p), i)
        queue = deque(sorted(range(n), key=lambda i: (first[tuple(prompts[i])], i)))
        results: list[Generation | None] = [None] * n
        bucket = buckets[0]
        occupant: list[int | None] = [None] * pool.slots  # row held by each slot
        stop_lists = [tuple(s for s in c.stop if s) for c in cfgs]
        while True:
            free = [s for s in range(bucket) if occupant[s] is None]
            live = bucket - len(free)
            if queue and free and (live == 0 or len(free) >= max(1, bucket // 4)):
                take = [queue.popleft() for _ in range(min(len(free), len(queue)))]
                self._fill(pool, free[: len(take)], take, prompts, cfgs, seeds,
                           [set_index[stop_lists[i]] for i in take])
                for s, i in zip(free, take):
                    occupant[s] = i
                live += len(take)
            if live == 0:
                break
            smaller = bucket // 2
            if not queue and smaller in buckets and live <= smaller:
                while smaller // 2 in buckets and live <= smaller // 2:
                    smaller //= 2
                self._compact(pool, occupant, smaller)
                bucket = smaller
            self._replay(pool, bucket, key, tables)
            self.stats.windows += 1
            self.stats.buckets.append(bucket)
            done = pool.done[:bucket].cpu().tolist()
            ended = [s for s in range(bucket) if occupant[s] is not None and done[s]]
            if ended:
                self._collect(pool, ended, occupant, results, stop_lists)
        return [r for r in results if r is not None]

    def _buckets(self, top: int) -> list[int]:
        out, b = [], top
        while b >= 1:
            out.append(b)
            if b <= self.min_bucket:
                break
            b //= 2
        return out

    def _fill(self, pool: SlotPool, slots: list[int], rows: list[int], prompts: list[list[int]],
              cfgs: list[GenerationConfig], seeds: list[int], sets: list[int]) -> None:
        """Prefill ``rows`` into ``slots``: each distinct prompt once, then copied."""
        dev = self.device
        owner: dict[tuple[int, ...], int] = {}
        uniq: list[int] = []  # positions in rows/slots whose prompt is prefilled
        src: list[int] = []
        for j, i in enumerate(rows):
            k = tuple(prompts[i])
            if k not in owner:
                owner[k] = j
                uniq.append(j)
            src.append(owner[k])
        for chunk in self._prefill_chunks([len(prompts[rows[j]]) for j in uniq]):
            js = [uniq[c] for c in chunk]
            width = max(len(prompts[rows[j]]) for j in js)
            ids = torch.zeros((len(js), width), dtype=torch.long)
            for b, j in enumerate(js):
                p = prompts[rows[j]]
                ids[b, : len(p)] = torch.tensor(p, dtype=torch.long)
            lengths = torch.tensor([len(prompts[rows[j]]) for j in js], dtype=torch.long, device=dev)
            target = torch.tensor([slots[j] for j in js], dtype=torch.long, device=dev)
            logits = prefill(self.weights, pool.cache_k, pool.cache_v, target, ids.to(dev), lengths,
                             pool.cos, pool.sin)
            pool.logits[target] = logits
        self.stats.prefills += len(uniq)
        copies = [(slots[src[j]], slots[j]) for j in range(len(rows)) if src[j] != j]
        if copies:
            a = torch.tensor([c[0] for c in copies], dtype=torch.long, device=dev)
            b = torch.tensor([c[1] for c in copies], dtype=torch.long, device=dev)
            pool.cache_k[:, b] = pool.cache_k[:, a]
            pool.cache_v[:, b] = pool.cache_v[:, a]
            pool.logits[b] = pool.logits[a]
        self.stats.prefill_rows += len(rows)
        at = torch.tensor(slots, dtype=torch.long, device=dev)

        def put(t: torch.Tensor, values: list[int]) -> None:
            t[at] = torch.tensor(values, dtype=t.dtype).to(dev)

        put(pool.pos, [len(prompts[i]) for i in rows])
        put(pool.count, [0] * len(rows))
        put(pool.cap, [cfgs[i].max_new_tokens for i in rows])
        put(pool.seed, [seeds[i] for i in rows])
        put(pool.sstate, [0] * len(rows))
        put(pool.sset, sets)
        put(pool.finish, [LIVE] * len(rows))
        put(pool.which, [-1] * len(rows))
        pool.done[at] = False

    def _prefill_chunks(self, lengths: list[int]) -> list[list[int]]:
        """Rows per prefill forward, bounded in tokens (and, on CPU, attention memory)."""
        budget = 65536 if self.device.type == "cuda" else 8192
        order = sorted(range(len(lengths)), key=lambda j: lengths[j])
        chunks: list[list[int]] = []
        cur: list[int] = []
        for j in order:
            width = lengths[j]
            cost = (len(cur) + 1) * width * (1 if self.device.type == "cuda" else max(1, width // 64))
            if cur and cost > budget:
                chunks.append(cur)
                cur = []
            cur.append(j)
        if cur:
            chunks.append(cur)
        return chunks

    def _compact(self, pool: SlotPool, occupant: list[int | None], bucket: int) -> None:
        """Move live slots at or past ``bucket`` into free slots below it."""
        movers = [s for s in range(bucket, len(occupant)) if occupant[s] is not None]
        holes = [s for s in range(bucket) if occupant[s] is None]
        if not movers:
            return
        assert len(holes) >= len(movers)
        dev = self.device
        a = torch.tensor(movers, dtype=torch.long, device=dev)
        b = torch.tensor(holes[: len(movers)], dtype=torch.long, device=dev)
        pool.cache_k[:, b] = pool.cache_k[:, a]
        pool.cache_v[:, b] = pool.cache_v[:, a]
        for t in pool.rows():
            t[b] = t[a]
        pool.done[a] = True
        for s, h in zip(movers, holes):
            occupant[h], occupant[s] = occupant[s], None

    def _collect(self, pool: SlotPool, ended: list[int], occupant: list[int | None],
                 results: list[Generation | None], stop_lists: list[tuple[str, ...]]) -> None:
        at = torch.tensor(ended, dtype=torch.long, device=self.device)
        counts = pool.count[at].cpu().tolist()
        width = max(counts)
        toks = pool.out_tok[at, :width].cpu().tolist()
        lps = pool.out_lp[at, :width].cpu().tolist()
        finish = pool.finish[at].cpu().tolist()
        which = pool.which[at].cpu().tolist()
        for k, s in enumerate(ended):
            i = occupant[s]
            assert i is not None
            ids = toks[k][: counts[k]]
            stop = stop_lists[i][which[k]] if finish[k] == STOP else None
            results[i] = Generation(token_ids=ids, logprobs=lps[k][: counts[k]],
                                    text=self.tokenizer.decode(ids, skip_special_tokens=True,
                                                               clean_up_tokenization_spaces=False),
                                    finish_reason=REASONS[finish[k]], stop=stop)  # type: ignore[arg-type]
            occupant[s] = None

    # -- the decode window ---------------------------------------------------------------

    def _graph(self, pool: SlotPool, bucket: int, key: tuple, tables: tuple[torch.Tensor, torch.Tensor]) -> None:
        gkey = (bucket, key)
        if gkey in pool.graphs:
            return
        body = decode_window(pool, self.weights, self.eos_mask, bucket, key, tables, self.steps_per_sync)
        if not self.graphs:
            pool.graphs[gkey] = body
            return
        pool.done.fill_(True)
        if self._stream is None:  # one side stream for every warm-up (each new stream costs workspaces)
            self._stream = torch.cuda.Stream(device=self.device)
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            body()  # warm-up: lazy initialisation outside the capture
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._mempool):
            body()
        # The body's closure holds tensors made outside the capture (row indices): they must
        # live as long as the graph, or their memory is reused and the replay reads garbage.
        pool.graphs[gkey] = (graph, body)
        self.stats.graphs_captured += 1

    def _replay(self, pool: SlotPool, bucket: int, key: tuple, tables: tuple[torch.Tensor, torch.Tensor]) -> None:
        g = pool.graphs[(bucket, key)]
        if self.graphs:
            g[0].replay()
        else:
            g()

    # -- resources -----------------------------------------------------------------------

    def _pool(self, length: int) -> SlotPool:
        """A pool of at least ``length`` positions: the smallest held one that is at most
        ``reuse_factor`` times longer (no new capture), else a new one (least recently
        used pools dropped first). Every new pool means new CUDA graphs, so a run whose
        context lengths wander settles on a few pools instead of rebuilding them."""
        fits = sorted((k[1], k) for k in self._pools if length <= k[1] <= self.reuse_factor * length)
        if fits:
            key = fits[0][1]
            pool = self._pools.pop(key)
            self._pools[key] = pool  # most recently used last
            return pool
        key = (self.max_slots, length)
        while len(self._pools) >= self.max_pools:
            self._drop(next(iter(self._pools)))
        if self.device.type == "cuda":
            need = 2 * len(self.weights.layers) * self.max_slots * self.weights.kv_heads * length * self.weights.head_dim
            need *= torch.finfo(self.dtype).bits // 8
            while self._pools and torch.cuda.mem_get_info(self.device)[0] < 1.5 * need:
                self._drop(next(iter(self._pools)))
            torch.cuda.empty_cache()
        pool = SlotPool(self.weights, self.max_slots, length, self.device)
        self._pools[key] = pool
        return pool

    def _drop(self, key: tuple[int, int]) -> None:
        pool = self._pools.pop(key)
        for entry in pool.graphs.values():
            if isinstance(entry, tuple):
                entry[0].reset()
        pool.graphs.clear()

    def _stop_tables(self, stop_sets: tuple[tuple[str, ...], ...]) -> tuple[torch.Tensor, torch.Tensor]:
        got = self._tables.get(stop_sets)
        if got is None:
            built = [self._single_tables.get(s) or self._single_tables.setdefault(s, build_stop_tables(s, self._pieces))
                     for s in stop_sets]
            states = max(t.states for t in built)
            vocab = len(self._pieces)
            nxt = torch.zeros((len(built), states, vocab), dtype=torch.long)
            hit = torch.full((len(built), states, vocab), -1, dtype=torch.long)
            for i, t in enumerate(built):
                nxt[i, : t.states] = torch.from_numpy(t.next_state).long()
                hit[i, : t.states] = torch.from_numpy(t.hit).long()
            got = (nxt.to(self.device), hit.to(self.device))
            self._tables[stop_sets] = got
        return got
