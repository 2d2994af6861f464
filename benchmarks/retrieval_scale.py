"""Retrieval at Wikipedia scale: a synthetic Wikipedia of any size in the papers' dump
formats, and the scaling table of docs/benchmarks.md (build, load, search, memory).

The corpus: ``--docs`` pages, each a unique title of 1-3 words and 2-6 sentences of 8-20
words; words are drawn from a Zipfian vocabulary (exponent 1) whose 150 most frequent
words are English's commonest words in about their order of frequency ("the", "of",
"and", ..., "he", "his", "from", ...: 33 of them are bm25s's stopwords, the others are
indexed, so queries meet long posting lists as real claims do) followed by ``--vocab``
pseudo-words ("bakilo", "temura", ...). Pages
are written as FEVER's ``wiki-pages/wiki-NNN.jsonl`` (``--format fever``), HotpotQA's
2017 introductions ``AA/wiki_00.bz2`` (``--format wiki2017``) or factrl's ``jsonl`` with
the sentences and ids given (``--format jsonl``: what the code before the streaming
build reads). Queries (``queries.jsonl``, ``{"id", "text"}``): 6 non-stopwords of one
sentence of a random page (topped up with random words), as a claim paraphrasing its
evidence would be.

    # a corpus and its queries
    python benchmarks/retrieval_scale.py generate --docs 200000 --format fever --out /tmp/scale/200k
    # the table (corpora generated when missing); heavy: run it at nice 19
    nice -n 19 python benchmarks/retrieval_scale.py measure --docs 50000 200000 --work /tmp/scale
    # identical results to the code before the streaming index (a copy of its src/)
    git archive 4dfdf8d src | tar -x -C /tmp/baseline
    nice -n 19 python benchmarks/retrieval_scale.py compare --docs 200000 --work /tmp/scale --baseline-src /tmp/baseline/src
    # docs/benchmarks.md's tables from the result files
    python benchmarks/retrieval_scale.py table /tmp/scale/scale-*.json

Every heavy step runs in its own process under ``/usr/bin/time -v`` (peak RSS) or reports
its own ``/proc/self/status`` (RSS split into anonymous memory and mapped file pages).
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

# English's commonest words, roughly by frequency (the head of the synthetic vocabulary)
COMMON_ENGLISH = """the of and to a in is was for that on as with by he it at from his be this are or an which
not but had first they their were also one has her its have been she new two after there who all will if
into other when more time no year some these city about many then only such than can most years later
would over world made up known out school part between during under while team three both film state
national university may since through where states united season used american first him early war life
series music any several area each well included became de age later album population second four day
began south north including best people them de work played like high before against game however"""
FEVER_PAGES_PER_FILE = 50_000
WIKI2017_PAGES_PER_FILE = 2_000
CLI = [sys.executable, "-c", "from factrl.cli import main; main()"]


# --- the synthetic Wikipedia ---------------------------------------------------------


def pseudo_words(n: int) -> list[str]:
    """``n`` distinct pronounceable words of 2+ consonant-vowel syllables."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syll = [c + v for c in consonants for v in vowels]  # 70
    out = []
    i = 0
    while len(out) < n:
        x, word = i + len(syll), []  # skip single-syllable words
        while x:
            x, r = divmod(x, len(syll))
            word.append(syll[r])
        out.append("".join(reversed(word)))
        i += 1
    return out


class Vocabulary:
    def __init__(self, n_words: int, seed: int) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        common = [w for w in COMMON_ENGLISH.split() if len(w) > 1 or w == "a"]
        common += [w for w in STOPWORDS_EN if w not in common]
        self.stop = list(dict.fromkeys(common))  # the head of the distribution (not all dropped by BM25)
        self.stopwords = frozenset(STOPWORDS_EN)
        self.words = np.array(self.stop + pseudo_words(n_words), dtype=object)
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        p = 1.0 / ranks
        self.cdf = np.cumsum(p / p.sum())
        content = p[len(self.stop):]
        self.content_cdf = np.cumsum(content / content.sum())
        self.rng = np.random.default_rng(seed)

    def sample(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.words) - 1)

    def sample_content(self, n: int) -> np.ndarray:
        idx = np.searchsorted(self.content_cdf, self.rng.random(n))
        return np.minimum(idx, len(self.content_cdf) - 1) + len(self.stop)


def _pages(n_docs: int, vocab: Vocabulary, query_docs: dict[int, int], queries: list[tuple[int, str]],
           chunk: int = 5_000):
    """Yield ``(title, sentences)`` pages; record a query for the pages in ``query_docs``."""
    rng, words = vocab.rng, vocab.words
    indexed = np.array([w not in vocab.stopwords for w in words[: len(vocab.stop)]] + [True], dtype=bool)
    titles: set[str] = set()
    for start in range(0, n_docs, chunk):
        n = min(chunk, n_docs - start)
        n_sents = rng.integers(2, 7, size=n)
        lengths = rng.integers(8, 21, size=int(n_sents.sum()))
        ids = vocab.sample(int(lengths.sum()))
        title_len = rng.integers(1, 4, size=n)
        title_ids = vocab.sample_content(int(title_len.sum()))
        w = t = s = 0
        for i in range(n):
            title = " ".join(x.capitalize() for x in words[title_ids[t : t + title_len[i]]])
            t += title_len[i]
            base, k = title, 1
            while title in titles:
                k += 1
                title = f"{base} ({k})"
            titles.add(title)
            sentences = []
            for _ in range(n_sents[i]):
                sent_ids = ids[w : w + lengths[s]]
                w += lengths[s]
                s += 1
                sentences.append((sent_ids, " ".join(words[sent_ids])))
            qi = query_docs.get(start + i)
            if qi is not None:
                sent_ids = sentences[int(rng.integers(len(sentences)))][0]
                content = [int(x) for x in sent_ids if indexed[min(int(x), len(indexed) - 1)]]
                content = list(dict.fromkeys(content))[:6]
                content += vocab.sample_content(6 - len(content)).tolist()
                queries.append((qi, " ".join(words[content])))
            yield title, [text[0].upper() + text[1:] for _, text in sentences]


def fever_id(title: str) -> str:
    return title.replace(" ", "_").replace("(", "-LRB-").replace(")", "-RRB-")


def generate(n_docs: int, out: Path, fmt: str, *, n_queries: int = 1000, n_vocab: int = 1_000_000, seed: int = 0,
             compress: bool = True) -> None:
    """Write the corpus (``out/corpus``) and ``out/queries.jsonl``."""
    vocab = Vocabulary(n_vocab, seed)
    rng = np.random.default_rng(seed + 1)
    picks = rng.choice(n_docs, size=min(n_queries, n_docs), replace=False)
    query_docs = {int(d): i for i, d in enumerate(picks.tolist())}
    queries: list[tuple[int, str]] = []
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    fh = None
    t0 = time.perf_counter()
    for i, (title, sentences) in enumerate(_pages(n_docs, vocab, query_docs, queries)):
        if fmt == "fever":
            if i % FEVER_PAGES_PER_FILE == 0:
                fh and fh.close()
                (corpus / "wiki-pages").mkdir(exist_ok=True)
                fh = (corpus / "wiki-pages" / f"wiki-{i // FEVER_PAGES_PER_FILE + 1:03d}.jsonl").open("w", encoding="utf-8")
                if i == 0:
                    fh.write(json.dumps({"id": "", "text": "", "lines": ""}) + "\n")  # as the real dump opens
            toks = [s + " ." for s in sentences]
            lines = "\n".join(f"{j}\t{s}" + ("\t" + sentences[j].split(" ", 1)[0] if j % 2 else "")
                              for j, s in enumerate(toks))
            row = {"id": fever_id(title), "text": " ".join(toks) + " ", "lines": lines}
        elif fmt == "wiki2017":
            if i % WIKI2017_PAGES_PER_FILE == 0:
                fh and fh.close()
                f = i // WIKI2017_PAGES_PER_FILE
                sub = corpus / (chr(65 + f // 2600 % 26) + chr(65 + f // 100 % 26))
                sub.mkdir(exist_ok=True)
                name = f"wiki_{f % 100:02d}" + (".bz2" if compress else "")
                fh = bz2.open(sub / name, "wt", encoding="utf-8") if compress else (sub / name).open("w", encoding="utf-8")
            text = [s + "." if j == 0 else " " + s + "." for j, s in enumerate(sentences)]
            row = {"id": str(i + 1), "url": f"https://en.wikipedia.org/wiki?curid={i + 1}", "title": title,
                   "text": text, "charoffset": [], "text_with_links": text, "charoffset_with_links": []}
        elif fmt == "jsonl":  # the same pages as fever_wiki reads them, in factrl's jsonl
            if fh is None:
                fh = (corpus / "corpus.jsonl").open("w", encoding="utf-8")
            pid = fever_id(title)
            row = {"id": pid, "title": title, "sentences": [s + " ." for s in sentences],
                   "sentence_ids": [f"{pid}_sentence_{j}" for j in range(len(sentences))]}
        else:
            raise SystemExit(f"unknown format {fmt!r}")
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        if (i + 1) % 200_000 == 0:
            print(f"[generate] {i + 1}/{n_docs} pages, {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    fh and fh.close()
    with (out / "queries.jsonl").open("w", encoding="utf-8") as q:
        for qi, text in sorted(queries):
            q.write(json.dumps({"id": f"q{qi}", "text": text}) + "\n")
    # A worst case: 6 of the commonest indexed words (long lists, low scores) per query.
    head = np.array([i for i, w in enumerate(vocab.stop) if w not in vocab.stopwords])
    weights = 1.0 / (head + 1.0)
    with (out / "queries_common.jsonl").open("w", encoding="utf-8") as q:
        for qi in range(n_queries):
            picks = rng.choice(head, size=6, replace=False, p=weights / weights.sum())
            q.write(json.dumps({"id": f"c{qi}", "text": " ".join(vocab.words[picks])}) + "\n")
    (out / "corpus.json").write_text(json.dumps({"docs": n_docs, "format": fmt, "vocab": n_vocab, "seed": seed,
                                                 "queries": len(queries)}) + "\n")


# --- measuring -----------------------------------------------------------------------


def _status() -> dict[str, float]:
    """This process's memory (GB) from /proc/self/status."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) / 1e6  # kB → GB
    return out


def probe(index: Path, query_files: list[Path], *, kernel: str, threads: int, n: int, batch: int, k: int) -> dict:
    """Load an index and time searches over each query file (in this process; run it in
    a fresh one)."""
    t0 = time.perf_counter()
    from factrl.retrieval.index import load_index

    before = _status()
    ix = load_index(index, options={"kernel": kernel, "n_threads": threads})
    load_s = time.perf_counter() - t0
    after_load = _status()
    out = {"kernel": getattr(ix.backend, "kernel", None), "threads": threads, "n_passages": len(ix), "load_s": load_s,
           "rss_before_load_gb": before, "rss_after_load_gb": after_load, "batch": batch, "k": k, "sets": {}}
    for path in query_files:
        qs = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
        qs = (qs * (n // len(qs) + 1))[:n]
        # An untimed pass first: the pages these queries need (posting lists, the passages
        # they return) come into the page cache, numba loads its compiled kernel.
        t1 = time.perf_counter()
        ix.search(qs[:batch], k)
        first_s = time.perf_counter() - t1
        for s in range(batch, n, batch):
            ix.search(qs[s : s + batch], k)
        warm_s = time.perf_counter() - t1
        t2, c2, f2 = time.perf_counter(), time.process_time(), _major_faults()
        hits = work = 0
        for s in range(0, n, batch):
            hits += sum(len(h) for h in ix.search(qs[s : s + batch], k))
            work += getattr(getattr(ix.backend, "_kernel", None), "work", 0)
        search_s, cpu_s = time.perf_counter() - t2, time.process_time() - c2
        # On a shared machine wall time measures the others' load too; CPU seconds measure
        # the code (threads' CPU adds up, so per CPU-second is per core).
        out["sets"][path.stem] = {"first_batch_s": first_s, "untimed_pass_s": warm_s, "queries": n, "search_s": search_s,
                                  "queries_per_s": n / search_s, "search_cpu_s": cpu_s,
                                  "queries_per_cpu_s": n / cpu_s, "major_faults": _major_faults() - f2,
                                  "mean_hits": hits / n, "work_per_query": work / n}
    out["rss_after_search_gb"] = _status()
    return out


def _major_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


def _anon_kb(pid: int) -> int:
    """RssAnon (kB) of ``pid`` and its descendants, from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1])
            for t in Path(f"/proc/{p}/task").iterdir():
                children = (t / "children").read_text().split()
                todo.extend(int(c) for c in children)
        except (OSError, ValueError):
            continue
    return total


def timed(cmd: list[str], *, env: dict | None = None) -> dict:
    """Run ``cmd`` under /usr/bin/time -v; wall and CPU seconds, peak RSS (GB, mapped file
    pages included) and peak anonymous memory (GB, sampled every 0.2 s)."""
    import threading

    t0 = time.perf_counter()
    child = subprocess.Popen(["/usr/bin/time", "-v", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    peak_anon = [0]

    def sample() -> None:
        while child.poll() is None:
            peak_anon[0] = max(peak_anon[0], _anon_kb(child.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = child.communicate()
    sampler.join()
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    def grab(pattern: str) -> float | None:
        m = re.search(pattern, proc.stderr)
        return float(m.group(1)) if m else None

    rss = grab(r"Maximum resident set size \(kbytes\): (\d+)")
    cpu = (grab(r"User time \(seconds\): ([\d.]+)") or 0.0) + (grab(r"System time \(seconds\): ([\d.]+)") or 0.0)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_gb": rss / 1e6 if rss else None, "peak_anon_gb": peak_anon[0] / 1e6,
            "major_faults": grab(r"Major \(requiring I/O\) page faults: (\d+)"), "stdout": proc.stdout[-2000:],
            "stderr_tail": proc.stderr[-3000:]}


def warm(directory: Path) -> int:
    """Read a folder's .npy files once (into the page cache); returns the bytes read."""
    total = 0
    for f in sorted(directory.glob("*.npy")):
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 26):
                total += len(chunk)
    return total


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def _probe_cmd(index: Path, queries: list[Path], kernel: str, threads: int, n: int) -> dict:
    cmd = [sys.executable, __file__, "probe", "--index", str(index), "--queries", *map(str, queries), "--kernel", kernel,
           "--threads", str(threads), "--n", str(n)]
    r = timed(cmd)
    res = json.loads(r["stdout"].strip().splitlines()[-1])
    res["process_peak_rss_gb"] = r["peak_rss_gb"]
    return res


def measure(sizes: list[int], work: Path, kernels: list[str], threads: list[int], n_queries: int,
            reference_max: int, tag: str = "", cli_search: bool = True) -> list[dict]:
    rows = []
    for n in sizes:
        d = work / _label(n)
        if not (d / "queries.jsonl").is_file():
            t = time.perf_counter()
            generate(n, d, "fever")
            print(f"[measure] generated {n} pages in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
        ix = d / "index"
        row: dict = {"docs": n, "corpus_bytes": du(d / "corpus")}
        if not (ix / "manifest.json").is_file():
            b = timed([*CLI, "index", "build", "--corpus", str(d / "corpus"), "--corpus-format", "fever_wiki",
                       "--out", str(ix), "--overwrite"])
            (d / "build.json").write_text(json.dumps(b, indent=2))
        else:
            b = json.loads((d / "build.json").read_text())
        row["build"] = {k: b.get(k) for k in ("wall_s", "cpu_s", "peak_rss_gb", "peak_anon_gb", "major_faults")}
        if row["build"]["cpu_s"] is None:  # a build.json from before cpu_s was parsed
            m = [float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", b["stderr_tail"])]
            row["build"]["cpu_s"] = sum(m) if m else None
        manifest = json.loads((ix / "manifest.json").read_text())
        row["passages"] = manifest["corpus"]["n_passages"]
        row["index_bytes"] = du(ix)
        row["probes"] = []
        row["warm_bytes"] = warm(ix / "bm25")  # every kernel starts with the matrix in the page cache
        for kernel in kernels:
            if kernel == "reference" and n > reference_max:
                continue
            for t in threads:
                res = _probe_cmd(ix, [d / "queries.jsonl", d / "queries_common.jsonl"], kernel, t,
                                 n_queries if kernel != "reference" else 200)
                row["probes"].append(res)
                rates = ", ".join(f"{name} {v['queries_per_s']:.0f} q/s ({v['queries_per_cpu_s']:.0f} per CPU-s)"
                                  for name, v in res["sets"].items())
                print(f"[measure] {_label(n)} {kernel} x{t}: load {res['load_s']:.1f}s, {rates}", file=sys.stderr,
                      flush=True)
        if cli_search:
            s = timed([*CLI, "search", "--index", str(ix), "--queries", str(d / "queries.jsonl"), "--k", "10",
                       "--out", str(d / "hits.jsonl"), "--quiet"])
            row["cli_search"] = {"wall_s": s["wall_s"], "cpu_s": s["cpu_s"], "peak_rss_gb": s["peak_rss_gb"],
                                 "says": s["stdout"].strip()}
        rows.append(row)
        (work / f"scale{'-' + tag if tag else ''}.json").write_text(json.dumps({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                                     "rows": rows}, indent=2))
    return rows


def _same_hits(before_file: Path, after_file: Path) -> dict[str, int]:
    """Per query: identical hits, hits that differ only among passages tied at the k-th
    score (bm25s's argpartition keeps any of them), or otherwise different."""
    before = [json.loads(line) for line in before_file.open()]
    after = [json.loads(line) for line in after_file.open()]
    same = tie_only = other = 0
    for a, b in zip(before, after, strict=True):
        ka = [(h["passage_id"], h["score"]) for h in a["hits"]]
        kb = [(h["passage_id"], h["score"]) for h in b["hits"]]
        if ka == kb:
            same += 1
            continue
        last = ka[-1][1] if ka else None
        if [s for _, s in ka] == [s for _, s in kb] and \
                [x for x in ka if x[1] != last] == [x for x in kb if x[1] != last]:
            tie_only += 1
        else:
            other += 1
    return {"queries": len(after), "identical": same, "differ_only_among_ties_at_k": tie_only, "differ_otherwise": other}


def compare(n: int, work: Path, baseline_src: Path, reuse_builds: bool = False) -> dict:
    """Build and search one corpus with the code in ``baseline_src`` and with this one;
    ``reuse_builds`` keeps indexes (and their build figures) an earlier compare made."""
    d = work / f"{_label(n)}-jsonl"
    if not (d / "queries.jsonl").is_file():
        generate(n, d, "jsonl")
    corpus = d / "corpus" / "corpus.jsonl"
    earlier = json.loads((d / "compare.json").read_text()) if (d / "compare.json").is_file() else {}
    out: dict = {}
    for name, env in (("before", {**os.environ, "PYTHONPATH": str(baseline_src)}), ("after", dict(os.environ))):
        ix = d / f"index-{name}"
        if reuse_builds and (ix / "manifest.json").is_file() and "build_wall_s" in earlier.get(name, {}):
            out[name] = {k: earlier[name][k] for k in ("build_wall_s", "build_peak_rss_gb")}
            out[name]["build_reused_from"] = earlier.get("date", "an earlier compare")
        else:
            build = timed([*CLI, "index", "build", "--corpus", str(corpus), "--out", str(ix), "--overwrite"], env=env)
            out[name] = {"build_wall_s": build["wall_s"], "build_peak_rss_gb": build["peak_rss_gb"]}
        out[name]["index_bytes"] = du(ix)
        for qset in ("queries", "queries_common"):
            search = timed([*CLI, "search", "--index", str(ix), "--queries", str(d / f"{qset}.jsonl"), "--k", "10",
                            "--out", str(d / f"hits-{qset}-{name}.jsonl"), "--quiet"], env=env)
            out[name][qset] = {"search_wall_s": search["wall_s"], "search_cpu_s": search["cpu_s"],
                               "search_peak_rss_gb": search["peak_rss_gb"], "search_says": search["stdout"].strip()}
    for qset in ("queries", "queries_common"):
        out[qset] = _same_hits(d / f"hits-{qset}-before.jsonl", d / f"hits-{qset}-after.jsonl")
    out["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (d / "compare.json").write_text(json.dumps(out, indent=2))
    return out


def table(files: list[Path]) -> str:
    """The markdown tables of docs/benchmarks.md from ``measure``'s result files (rows of
    the same corpus size merged: builds from any file, probes from all)."""
    rows: dict[int, dict] = {}
    for f in files:
        for r in json.loads(f.read_text())["rows"]:
            row = rows.setdefault(r["docs"], {**r, "probes": []})
            row["probes"] += r["probes"]
            row.setdefault("cli_search", r.get("cli_search"))
            if r.get("cli_search"):
                row["cli_search"] = r["cli_search"]
    out = ["| documents (passages) | build wall / CPU s | build peak RSS GB | index on disk GB | load s | "
           "anonymous RSS after load GB | `factrl search` 1,000 queries: q/s, peak RSS GB |", "|---|---|---|---|---|---|---|"]
    for n, r in sorted(rows.items()):
        b, p0 = r["build"], min(r["probes"], key=lambda p: p["load_s"]) if r["probes"] else None
        cli = r.get("cli_search") or {}
        says = re.search(r"\((\d+) queries/s\)", cli.get("says", ""))
        out.append(f"| {_label(n)} ({r['passages']:,}) | {b['wall_s']:.0f} / {b['cpu_s']:.0f} | {b['peak_rss_gb']:.2f} | "
                   f"{r['index_bytes'] / 1e9:.2f} | {p0['load_s']:.1f} | {p0['rss_after_load_gb']['RssAnon']:.2f} | "
                   + (f"{says.group(1)}, {cli['peak_rss_gb']:.2f} |" if says and cli.get("peak_rss_gb") else "– |") if p0 else "")
    out += ["", "| documents | kernel | threads | claim-like queries: q/s (per CPU-s) | common-word queries: q/s (per CPU-s) "
            "| process peak RSS GB |", "|---|---|---:|---:|---:|---:|"]
    for n, r in sorted(rows.items()):
        for p in r["probes"]:
            sets = p["sets"]
            cell = lambda name: (f"{sets[name]['queries_per_s']:.0f} ({sets[name]['queries_per_cpu_s']:.0f})"  # noqa: E731
                                 if name in sets else "–")
            out.append(f"| {_label(n)} | {p['kernel']} | {p['threads']} | {cell('queries')} | {cell('queries_common')} | "
                       f"{p.get('process_peak_rss_gb') or float('nan'):.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--docs", type=int, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--format", choices=["fever", "wiki2017", "jsonl"], default="fever")
    g.add_argument("--queries", type=int, default=1000)
    g.add_argument("--vocab", type=int, default=1_000_000)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-compress", action="store_true", help="wiki2017: plain wiki_NN files")
    m = sub.add_parser("measure")
    m.add_argument("--docs", type=int, nargs="+", required=True)
    m.add_argument("--work", type=Path, required=True)
    m.add_argument("--kernels", nargs="+", default=["maxscore", "numba", "numpy", "reference"])
    m.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    m.add_argument("--queries", type=int, default=2000)
    m.add_argument("--reference-max", type=int, default=2_000_000, help="largest corpus the reference kernel runs on")
    m.add_argument("--tag", default="", help="results go to WORK/scale-TAG.json")
    m.add_argument("--no-cli-search", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("--docs", type=int, default=200_000)
    c.add_argument("--work", type=Path, required=True)
    c.add_argument("--baseline-src", type=Path, required=True, help="src/ of the code to compare with")
    c.add_argument("--reuse-builds", action="store_true", help="keep the indexes an earlier compare built")
    t = sub.add_parser("table", help="markdown tables from measure's result files")
    t.add_argument("files", type=Path, nargs="+")
    p = sub.add_parser("probe", help="(internal) load an index and time searches, print JSON")
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--queries", type=Path, nargs="+", required=True)
    p.add_argument("--kernel", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    if a.cmd == "generate":
        generate(a.docs, a.out, a.format, n_queries=a.queries, n_vocab=a.vocab, seed=a.seed, compress=not a.no_compress)
    elif a.cmd == "measure":
        print(json.dumps(measure(a.docs, a.work, a.kernels, a.threads, a.queries, a.reference_max, a.tag,
                                 not a.no_cli_search), indent=2))
    elif a.cmd == "compare":
        print(json.dumps(compare(a.docs, a.work, a.baseline_src, a.reuse_builds), indent=2))
    elif a.cmd == "table":
        print(table(a.files))
    else:
        print(json.dumps(probe(a.index, a.queries, kernel=a.kernel, threads=a.threads, n=a.n, batch=a.batch, k=a.k)))


if __name__ == "__main__":
    main()
