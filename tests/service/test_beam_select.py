"""Beam search chooses a step for all its sentences at once (``Beam.select`` over
``ranked_continuations``); each sentence's choice must be the one it makes alone, ranked
by itself: the per-sentence rules, written out here as the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from models.scoring import NEG_INF
from service import ranking, strategies
from service.decoding import SpecialIds, make_search
from service.ranking import best_first
from service.strategies import ARRAY_MIN_SENTENCES, BEAM, EOLE_BEAM, Selection

SPECIAL = SpecialIds(pad=0, bos=1, eos=2, unk=3)


def alone(s, first: int, values: np.ndarray, ids: np.ndarray) -> Selection:
    """One sentence's step by the rules of ``models.search.beam_search``, on its own rows
    and its own columns (its ``top_k`` best and EOS)."""
    v, i = values[first : first + s.rows], ids[first : first + s.rows]
    if v.shape[1] > s.top_k + 1:
        cols = [*range(s.top_k), v.shape[1] - 1]
        v, i = v[:, cols], i[:, cols]
    total = (np.array(s.scores, dtype=np.float32)[:, None] + v).ravel()
    order = np.argsort(-total, kind="stable")[: s.rank_k]
    beam = s.options.beam_size
    parents, tokens, scores, finished = [], [], [], []
    for rank, flat in enumerate(order.tolist()):
        score = total[flat].item()
        if score == NEG_INF:
            break
        row, tok = flat // v.shape[1], i.ravel()[flat].item()
        if tok == SPECIAL.eos:
            if rank < beam:
                finished.append((row, score))
            continue
        parents.append(row)
        tokens.append(tok)
        scores.append(score)
        if len(parents) == beam:
            break
    done = s.finished + len(finished) >= beam or not parents
    return Selection(parents, tokens, scores, finished, done)


def searches_at_random(rng, n: int):
    """Beam searches of several sizes, some with fewer live rows than their beam, some
    with hypotheses finished already, with random cumulative scores."""
    out = []
    for _ in range(n):
        beam = int(rng.choice([2, 3, 5]))
        s = make_search(8, DecodeOptions(beam_size=beam, n_best=1), SPECIAL)
        s.rows = int(rng.integers(1, beam + 1))
        s.scores = np.round(rng.normal(-3, 2, s.rows), 1).astype(np.float32).tolist()
        s.prev_tokens, s.parents = [5] * s.rows, list(range(s.rows))
        s._finished = [None] * int(rng.integers(0, beam))  # only their count is read
        out.append(s)
    return out


def step_at_random(rng, searches, k: int):
    """A step's candidates ``(rows, k + 1)`` (EOS last): rounded log-probs so that equal
    totals happen, some -inf (banned, EOS blocked), EOS often ranked high."""
    rows = sum(s.rows for s in searches)
    values = np.round(-rng.gamma(1.0, 1.5, (rows, k + 1)), 1).astype(np.float32)
    values.sort(axis=1)
    values[:, :k] = values[:, :k][:, ::-1]
    values[:, k] = np.round(rng.normal(-1.5, 1.5, rows), 1)
    # some rows have few candidates left: their sentence may continue fewer than beam
    values[rng.random((rows, k + 1)) < rng.choice([0.05, 0.9], (rows, 1), p=[0.8, 0.2])] = NEG_INF
    ids = rng.integers(4, 50, (rows, k + 1))
    ids[:, k] = SPECIAL.eos
    return values, ids


def test_each_sentence_chooses_as_it_would_alone():
    seen = {"finished": 0, "done": 0, "fewer than beam": 0, "nothing": 0}
    for seed in range(12):
        rng = np.random.default_rng(seed)
        searches = searches_at_random(rng, 40)
        k = max(s.top_k for s in searches) + int(rng.integers(0, 3))  # a wider step
        values, ids = step_at_random(rng, searches, k)
        firsts = np.cumsum([0] + [s.rows for s in searches])[:-1].tolist()
        got = BEAM.select(searches, firsts, values, ids)  # as arrays: 40 sentences
        want = [alone(s, f, values, ids) for s, f in zip(searches, firsts, strict=True)]
        assert got == want, f"seed {seed}"
        # a few at a time: one sentence at a time, the same selections
        for part in range(0, 40, 5):
            few = BEAM.select(searches[part : part + 5], firsts[part : part + 5], values, ids)
            assert few == want[part : part + 5], f"seed {seed}, sentences {part}.."
        for sel, s in zip(got, searches, strict=True):
            seen["finished"] += bool(sel.finished)
            seen["done"] += sel.done
            seen["fewer than beam"] += 0 < len(sel.parents) < s.options.beam_size
            seen["nothing"] += not sel.parents
    assert min(seen.values()) > 0, seen  # every case of the rules was met


def test_many_sentences_choose_as_arrays(monkeypatch):
    """From ARRAY_MIN_SENTENCES on a step chooses with masks, never per sentence."""
    monkeypatch.setattr(type(BEAM), "_choose", lambda *a: pytest.fail("per sentence"))
    rng = np.random.default_rng(5)
    searches = searches_at_random(rng, ARRAY_MIN_SENTENCES)
    values, ids = step_at_random(rng, searches, max(s.top_k for s in searches))
    firsts = np.cumsum([0] + [s.rows for s in searches])[:-1].tolist()
    assert len(BEAM.select(searches, firsts, values, ids)) == ARRAY_MIN_SENTENCES


def test_a_sentence_with_nothing_allowed_is_done():
    s = make_search(4, DecodeOptions(beam_size=3), SPECIAL)
    values = np.full((1, 7), NEG_INF, dtype=np.float32)
    ids = np.arange(10, 17)[None, :]
    (selection,) = BEAM.select([s], [0], values, ids)
    assert selection == Selection([], [], [], [], True)


@pytest.mark.parametrize("arrays_from", [1, 16], ids=["arrays", "per-sentence"])
def test_eole_beam_ranks_the_same_candidates(monkeypatch, arrays_from):
    """Eole's beam keeps its own choice rules over the batched ranking as over its own:
    with no EOS among the candidates it continues the best ``beam`` of each sentence."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", arrays_from)
    rng = np.random.default_rng(3)
    searches = [
        make_search(6, DecodeOptions(beam_size=b, search="eole"), SPECIAL) for b in (2, 4, 4)
    ]
    values, ids = step_at_random(rng, searches, 4)
    values[values == NEG_INF] = -60.0
    values[:, -1] = NEG_INF  # no EOS this step
    got = EOLE_BEAM.select(searches, [0, 1, 2], values, ids)
    for s, first, selection in zip(searches, [0, 1, 2], got, strict=True):
        v = values[first, : s.top_k]
        order = np.argsort(-v, kind="stable")
        order = [c for c in order.tolist() if v[c] != NEG_INF][: s.options.beam_size]
        assert selection.tokens == ids[first, order].tolist()
        assert selection.scores == v[order].tolist() and not selection.done


@pytest.mark.parametrize("seed", range(6))
def test_best_first_is_a_stable_descending_argsort(seed):
    """Ties (many: values drawn from a few), -inf, -0.0 beside 0.0 and NaN rank as a
    stable argsort of the negated values ranks them."""
    rng = np.random.default_rng(seed)
    pool = np.array([0.0, -0.0, -1.5, -1.5, -2.25, -np.inf, np.nan, -3.0, 1e-30, -1e-30])
    values = rng.choice(pool, size=(200, 55)).astype(np.float32)
    values[:5] = rng.normal(-4.0, 3.0, (5, 55)).astype(np.float32)  # distinct values too
    for rows in (ranking.SORT_KEYS_FROM - 1, 200):  # both ways of sorting
        for k in (1, 10, 55):
            want = np.argsort(-values[:rows], axis=1, kind="stable")[:, :k]
            assert np.array_equal(best_first(values[:rows], k), want)


def test_best_first_of_no_rows():
    assert best_first(np.zeros((0, 11), np.float32), 4).shape == (0, 4)
