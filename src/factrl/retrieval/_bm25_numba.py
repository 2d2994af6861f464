"""The numba BM25 top-k kernel (imported only when the ``numba`` kernel is asked for).

Scores add in float32 in query-token order, as bm25s's scorer does, so results are the
same bit for bit. Every contribution is >= 0 (the BM25 variants factrl allows), so a
passage's running score leaves 0 at most once: that is when it joins the candidates.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["topk_batch"]


@numba.njit(inline="always")
def _worse(s1: float, d1: int, s2: float, d2: int) -> bool:
    return s1 < s2 or (s1 == s2 and d1 > d2)


@numba.njit(nogil=True, cache=True)
def topk_batch(data, indices, indptr, terms, offsets, k, acc, touched, out_docs, out_scores, out_counts):  # noqa: ANN001, ANN201
    """For query ``q`` (term ids ``terms[offsets[q]:offsets[q+1]]``) write its best ``k``
    rows and scores to ``out_docs[q]``/``out_scores[q]`` and how many to
    ``out_counts[q]``. ``acc`` (float32, one per row, all 0) and ``touched`` (int64, one
    per row) are scratch; ``acc`` is all 0 again on return."""
    nq = offsets.shape[0] - 1
    for q in range(nq):
        m = 0
        for ti in range(offsets[q], offsets[q + 1]):
            t = terms[ti]
            for j in range(indptr[t], indptr[t + 1]):
                d = indices[j]
                old = acc[d]
                new = old + data[j]
                acc[d] = new
                if old == 0.0 and new != 0.0:
                    touched[m] = d
                    m += 1
        hs = out_scores[q]
        hd = out_docs[q]
        cnt = 0
        for i in range(m):
            d = touched[i]
            s = acc[d]
            acc[d] = 0.0
            if not s > 0.0:
                continue
            if cnt < k:  # grow the heap (worst at the root)
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
        # best first: insertion sort of the kept few
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
        out_counts[q] = cnt
    return np.int64(0)
