"""The numba BM25 top-k kernel (imported only when the ``numba`` kernel is asked for).

Scores add in float32 in query-token order, as bm25s's scorer does, so results are the
same bit for bit. Every contribution is >= 0 (the BM25 variants factrl allows), so a
passage's running score leaves 0 at most once: that is when it joins the candidates.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["maxscore_batch", "topk_batch"]


@numba.njit(inline="always")
def _worse(s1: float, d1: int, s2: float, d2: int) -> bool:
    return s1 < s2 or (s1 == s2 and d1 > d2)


# Rows per block of the blocked walk: a block of scores (512 KB) stays in the L2 cache
# while every term of the query adds into it, instead of each long list sweeping all scores.
_BLOCK = 131_072


@numba.njit(inline="always")
def _offer(hs, hd, cnt, k, s, d):  # noqa: ANN001, ANN202
    """Offer row ``d`` scored ``s`` to the bounded heap ``hs``/``hd`` of ``cnt`` kept rows
    (the worst at the root, at most ``k``); returns the new count."""
    if cnt < k:  # grow the heap
        j = cnt
        hs[j] = s
        hd[j] = d
        cnt += 1
        while j > 0:
            p = (j - 1) // 2
            if _worse(hs[j], hd[j], hs[p], hd[p]):
                hs[j], hs[p] = hs[p], hs[j]
                hd[j], hd[p] = hd[p], hd[j]
                j = p
            else:
                break
    elif _worse(hs[0], hd[0], s, d):  # better than the worst kept: replace it
        hs[0] = s
        hd[0] = d
        j = 0
        while True:
            left = 2 * j + 1
            if left >= cnt:
                break
            c = left
            if left + 1 < cnt and _worse(hs[left + 1], hd[left + 1], hs[left], hd[left]):
                c = left + 1
            if _worse(hs[c], hd[c], hs[j], hd[j]):
                hs[j], hs[c] = hs[c], hs[j]
                hd[j], hd[c] = hd[c], hd[j]
                j = c
            else:
                break
    return cnt


@numba.njit(inline="always")
def _best_first(hs, hd, cnt):  # noqa: ANN001, ANN202
    """Sort the ``cnt`` kept rows best first (insertion sort of the kept few)."""
    for i in range(1, cnt):
        s = hs[i]
        d = hd[i]
        j = i - 1
        while j >= 0 and _worse(hs[j], hd[j], s, d):
            hs[j + 1] = hs[j]
            hd[j + 1] = hd[j]
            j -= 1
        hs[j + 1] = s
        hd[j + 1] = d


@numba.njit
def _accumulate(data, indices, indptr, terms, weights, acc, touched, m, cursor, block):  # noqa: ANN001, ANN202
    """Add ``weights[i] ×`` the lists of ``terms`` into ``acc`` ``block`` rows at a time
    (the lists' rows ascend); within a block the terms go in the order given, so each row's
    sum is the same, bit for bit, as list after list. New rows are appended to ``touched``
    (``m`` so far); returns the new count. ``cursor`` is scratch, one per term."""
    nt = terms.shape[0]
    if nt == 1:  # one list is one monotonic sweep already
        t = terms[0]
        w = weights[0]
        for j in range(indptr[t], indptr[t + 1]):
            d = indices[j]
            old = acc[d]
            new = old + w * data[j]
            acc[d] = new
            if old == 0.0 and new != 0.0:
                touched[m] = d
                m += 1
        return m
    last = 0
    for u in range(nt):
        cursor[u] = indptr[terms[u]]
        e = indptr[terms[u] + 1]
        if e > cursor[u] and indices[e - 1] + 1 > last:
            last = indices[e - 1] + 1
    b0 = 0
    while b0 < last:
        b1 = b0 + block
        for u in range(nt):
            t = terms[u]
            w = weights[u]
            j = cursor[u]
            e = indptr[t + 1]
            while j < e:
                d = indices[j]
                if d >= b1:
                    break
                old = acc[d]
                new = old + w * data[j]
                acc[d] = new
                if old == 0.0 and new != 0.0:
                    touched[m] = d
                    m += 1
                j += 1
            cursor[u] = j
        b0 = b1
    return m


@numba.njit(nogil=True, cache=True)
def topk_batch(data, indices, indptr, terms, offsets, k, acc, touched, out_docs, out_scores, out_counts):  # noqa: ANN001, ANN201
    """For query ``q`` (term ids ``terms[offsets[q]:offsets[q+1]]``) write its best ``k``
    rows and scores to ``out_docs[q]``/``out_scores[q]`` and how many to
    ``out_counts[q]``. ``acc`` (float32, one per row, all 0) and ``touched`` (int64, one
    per row) are scratch; ``acc`` is all 0 again on return."""
    nq = offsets.shape[0] - 1
    longest = 1
    for q in range(nq):
        longest = max(longest, offsets[q + 1] - offsets[q])
    cursor = np.empty(longest, dtype=np.int64)
    ones = np.ones(longest, dtype=np.float32)
    for q in range(nq):
        qs, qe = offsets[q], offsets[q + 1]
        m = _accumulate(data, indices, indptr, terms[qs:qe], ones[: qe - qs], acc, touched, 0, cursor, _BLOCK)
        hs = out_scores[q]
        hd = out_docs[q]
        cnt = 0
        for i in range(m):
            d = touched[i]
            s = acc[d]
            acc[d] = 0.0
            if not s > 0.0:
                continue
            cnt = _offer(hs, hd, cnt, k, s, d)
        _best_first(hs, hd, cnt)
        out_counts[q] = cnt
    return np.int64(0)


# --- MaxScore: the same results, most of the long posting lists skipped ---------------

_EPS = 1e-4  # relative slack for float32 rounding (scores summed in another order)
_THETA_SAMPLE = 4_096  # candidates whose k-th best bounds the threshold while scanning


@numba.njit(inline="always")
def _find(indices, start, end, d):  # noqa: ANN001, ANN202
    """Position of row ``d`` in ``indices[start:end]`` (sorted), or -1."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and indices[lo] == d:
        return lo
    return -1


@numba.njit
def _kth_largest(acc, touched, count, k, heap):  # noqa: ANN001, ANN202
    """The k-th largest ``acc`` over ``touched[:count]`` (0.0 when fewer than k)."""
    if count < k:
        return 0.0
    n = 0
    for i in range(count):
        s = acc[touched[i]]
        if n < k:
            j = n
            heap[j] = s
            n += 1
            while j > 0:
                p = (j - 1) // 2
                if heap[j] < heap[p]:
                    heap[j], heap[p] = heap[p], heap[j]
                    j = p
                else:
                    break
        elif s > heap[0]:
            heap[0] = s
            j = 0
            while True:
                c = 2 * j + 1
                if c >= n:
                    break
                if c + 1 < n and heap[c + 1] < heap[c]:
                    c += 1
                if heap[c] < heap[j]:
                    heap[j], heap[c] = heap[c], heap[j]
                    j = c
                else:
                    break
    return heap[0]


@numba.njit
def _prune(acc, touched, count, rest, theta):  # noqa: ANN001, ANN202
    """Keep the candidates that can still reach ``theta``; the others go back to 0."""
    keep = 0
    floor = theta * (1.0 - _EPS)
    for i in range(count):
        d = touched[i]
        if acc[d] + rest >= floor:
            touched[keep] = d
            keep += 1
        else:
            acc[d] = 0.0
    return keep


@numba.njit(nogil=True, cache=True)
def maxscore_batch(data, indices, indptr, colmax, terms, offsets, k, acc, touched, out_docs, out_scores,
                   out_counts, out_work):  # noqa: ANN001, ANN201
    """:func:`topk_batch`'s results by MaxScore (Turtle & Flood, 1995).

    Terms go in decreasing order of their bound (multiplicity × the column's largest
    score). Once the bounds of the terms left sum below the k-th best partial score, no
    passage they alone hold can enter the top k: only passages already met are followed
    (found by binary search, or by one scan of a list that is short next to them), and
    those that cannot catch up are dropped. The survivors within a float32 rounding margin
    of the k-th best are then scored again exactly — every term in query order, as bm25s
    adds them — and ranked: the results equal the exhaustive walk's, bit for bit.
    ``out_work[q]`` counts the postings and lookups a query cost.
    """
    nq = offsets.shape[0] - 1
    heap = np.empty(max(k, 1), dtype=np.float32)
    for q in range(nq):
        qs, qe = offsets[q], offsets[q + 1]
        nt = qe - qs
        ut = np.empty(nt, dtype=np.int64)
        uw = np.zeros(nt, dtype=np.float32)
        nu = 0
        for ti in range(qs, qe):
            t = terms[ti]
            found = -1
            for u in range(nu):
                if ut[u] == t:
                    found = u
                    break
            if found < 0:
                ut[nu] = t
                uw[nu] = 1.0
                nu += 1
            else:
                uw[found] += 1.0
        bound = np.empty(nu, dtype=np.float64)
        for u in range(nu):
            bound[u] = np.float64(uw[u]) * np.float64(colmax[ut[u]])
        order = np.argsort(-bound)
        rest = np.zeros(nu + 1, dtype=np.float64)
        for jj in range(nu - 1, -1, -1):
            rest[jj] = rest[jj + 1] + bound[order[jj]]
        m = 0
        work = 0
        following = False  # only passages already met are followed
        for jj in range(nu):
            u = order[jj]
            t = ut[u]
            w = uw[u]
            s, e = indptr[t], indptr[t + 1]
            # A threshold above the bounds left needs partial scores above them, and no
            # partial score exceeds the bounds already spent: skip the selection until then.
            if not following and jj > 0 and m >= k and (rest[0] - rest[jj]) * (1.0 + 1e-3) >= rest[jj]:
                theta = _kth_largest(acc, touched, min(m, _THETA_SAMPLE), k, heap)
                if theta > 0.0 and rest[jj] < theta * (1.0 - _EPS):
                    following = True
                    m = _prune(acc, touched, m, rest[jj], theta)
            if not following:
                work += e - s
                for j in range(s, e):
                    d = indices[j]
                    old = acc[d]
                    new = old + w * data[j]
                    acc[d] = new
                    if old == 0.0 and new != 0.0:
                        touched[m] = d
                        m += 1
            else:
                if m == 0:
                    break
                if m * 24 < e - s:
                    work += m
                    for c in range(m):
                        d = touched[c]
                        pos = _find(indices, s, e, d)
                        if pos >= 0:
                            acc[d] += w * data[pos]
                else:
                    work += e - s
                    for j in range(s, e):
                        d = indices[j]
                        if acc[d] > 0.0:
                            acc[d] += w * data[j]
                theta = _kth_largest(acc, touched, m, k, heap)
                if theta > 0.0:
                    m = _prune(acc, touched, m, rest[jj + 1], theta)
        # survivors: within the rounding margin of the k-th best approximate score
        theta = _kth_largest(acc, touched, m, k, heap)
        floor = theta * (1.0 - _EPS)
        ns = 0
        for i in range(m):
            d = touched[i]
            if acc[d] > 0.0 and acc[d] >= floor:
                touched[ns] = d
                ns += 1
            else:
                acc[d] = 0.0
        # exact scores, query order, float32: bm25s's sum
        hs = out_scores[q]
        hd = out_docs[q]
        cnt = 0
        for i in range(ns):
            d = touched[i]
            acc[d] = 0.0
            sc = np.float32(0.0)
            for ti in range(qs, qe):
                t = terms[ti]
                pos = _find(indices, indptr[t], indptr[t + 1], d)
                if pos >= 0:
                    sc = sc + data[pos]
            work += nt
            if not sc > 0.0:
                continue
            cnt = _offer(hs, hd, cnt, k, sc, d)
        _best_first(hs, hd, cnt)
        out_counts[q] = cnt
        out_work[q] = work
    return np.int64(0)
