"""Pure-numpy tests of :mod:`service.decoding` against a scripted fake decoder step.

The fake model (:class:`FakeStepModel`) knows nothing about neural networks: its
decoder state is one float per row holding a *history id*, which maps to the
sentence and the token prefix decoded so far. Each step looks up the next-token
log-probs of that prefix in a table, so every expected token and score below can
be worked out by hand. The fake checks that the loop gathers the right state rows
(``parent_rows``), points every row at its own sentence's memory
(``row_sentence``, also after pool compaction) and feeds BOS only at step 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest

from models.options import SEARCHES, DecodeOptions, Hypothesis
from models.scoring import FORCED_EOS_FLOOR, ScoringRules, restrict
from service.decoding import (
    NEG_INF,
    Encoded,
    SpecialIds,
    StepOutput,
    candidates,
    make_search,
    pad_batch,
)
from service.loop import DecodeLoop, decode
from service.pool import MemoryPool
from service.strategies import BEAM, EOLE_BEAM, GREEDY, strategy_for

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCAB = 10
REAL = tuple(range(4, VOCAB))
SPECIAL = SpecialIds(pad=PAD, bos=BOS, eos=EOS, unk=UNK)

Prefix = tuple[int, ...]
Table = Callable[[tuple[int, ...], Prefix], dict[int, float]]


def approx(x):
    return pytest.approx(x, rel=1e-6, abs=1e-6)


def filler(tok: int) -> float:
    """Log-prob of a token a script does not mention: distinct and far below any scripted
    one; special tokens (unk and EOS included) lower still."""
    return -30.0 - 0.5 * tok if tok in REAL else -60.0


def vector(entries: dict[int, float]) -> np.ndarray:
    v = np.array([filler(t) for t in range(VOCAB)], dtype=np.float32)
    for tok, value in entries.items():
        v[tok] = value
    return v


class FakeStepModel:
    """A ``StepModel`` whose next-token log-probs come from ``table(src, prefix)``.

    ``leak_specials`` makes the fake break the graph contract and include pad/bos in its
    top-k (the host must still never emit them).
    """

    def __init__(self, table: Table, *, leak_specials: bool = False) -> None:
        self.table = table
        self.leak = leak_specials
        self.sources: list[tuple[int, ...]] = []  # uid -> source tokens
        self.histories: list[tuple[int, Prefix | None]] = []  # id -> (uid, prefix)
        self.calls: list[tuple[int, int]] = []  # (rows, top_k) of every step

    def _history(self, uid: int, prefix: Prefix | None) -> int:
        self.histories.append((uid, prefix))
        return len(self.histories) - 1

    def new_pool(self) -> MemoryPool:
        return MemoryPool()

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        batch, src_len = src_ids.shape
        assert src_ids.dtype == np.int64 and src_lengths.dtype == np.int64
        mask = np.arange(src_len)[None, :] < src_lengths[:, None]
        keys = np.zeros((batch, src_len, 2), dtype=np.float32)
        hist = np.zeros((batch, 1, 1), dtype=np.float32)
        for b in range(batch):
            n = int(src_lengths[b])
            assert (src_ids[b, n:] == PAD).all()
            uid = len(self.sources)
            self.sources.append(tuple(int(t) for t in src_ids[b, :n]))
            keys[b, :, 0] = uid + 1  # so a row can check it reads its own sentence
            hist[b, 0, 0] = self._history(uid, None)
        return Encoded(np.zeros((batch, src_len, 2), np.float32), keys, mask, (hist,))

    def step(
        self,
        *,
        prev_tokens: np.ndarray,
        parent_rows: np.ndarray,
        row_sentence: np.ndarray,
        memory: np.ndarray,
        keys: np.ndarray,
        mask: np.ndarray,
        states: tuple[np.ndarray, ...],
        top_k: int,
        log_probs: bool = False,
    ) -> StepOutput:
        (hist,) = states
        rows = prev_tokens.shape[0]
        assert parent_rows.shape == row_sentence.shape == (rows,)
        assert memory.shape[:2] == keys.shape[:2] == mask.shape
        assert mask.dtype == bool
        self.calls.append((rows, top_k))
        allowed = np.ones(VOCAB, dtype=bool)
        allowed[[EOS] if self.leak else [PAD, BOS, EOS]] = False
        values = np.empty((rows, top_k), dtype=np.float32)
        ids = np.empty((rows, top_k), dtype=np.int64)
        eos = np.empty(rows, dtype=np.float32)
        attention = np.zeros((rows, mask.shape[1]), dtype=np.float32)
        new = np.empty((rows, 1, 1), dtype=np.float32)
        # what the graph's TopK ranks: every log-prob, the specials blocked
        every = np.full((rows, VOCAB), NEG_INF, dtype=np.float32)
        for r in range(rows):
            uid, prefix = self.histories[int(hist[parent_rows[r], 0, 0])]
            src = self.sources[uid]
            slot = int(row_sentence[r])
            assert int(keys[slot, 0, 0]) == uid + 1, "row reads another sentence's memory"
            assert mask[slot].sum() == len(src) and mask[slot, : len(src)].all()
            tok = int(prev_tokens[r])
            if prefix is None:
                assert tok == BOS, "the first step must be fed BOS"
                prefix = ()
            else:
                assert tok not in (PAD, BOS, EOS), f"fed token {tok} after step 0"
                prefix = prefix + (tok,)
            lp = vector(self.table(src, prefix))
            cand = np.flatnonzero(allowed)
            best = cand[np.argsort(-lp[cand], kind="stable")][:top_k]
            assert top_k <= VOCAB, "top_k larger than the fake's vocabulary"
            # past the allowed tokens, the blocked ones at -inf (as the graph's TopK over
            # the whole vocabulary returns them)
            blocked = np.flatnonzero(~allowed)[: top_k - len(best)]
            values[r, : len(best)], ids[r, : len(best)] = lp[best], best
            values[r, len(best) :], ids[r, len(best) :] = NEG_INF, blocked
            eos[r] = lp[EOS]
            every[r, allowed] = lp[allowed]
            attention[r, : len(src)] = 1.0 / len(src)
            new[r, 0, 0] = self._history(uid, prefix)
        return StepOutput(values, ids, eos, attention, (new,), every if log_probs else None)


def scripted(script: dict[Prefix, dict[int, float]]) -> Table:
    """Same script for every source; an unscripted prefix ends at once (EOS -0.01)."""

    def table(src: tuple[int, ...], prefix: Prefix) -> dict[int, float]:
        return script.get(prefix, {EOS: -0.01})

    return table


def copy_table(src: tuple[int, ...], prefix: Prefix) -> dict[int, float]:
    """Copies the source, then ends: a sentence of n tokens finishes at step n."""
    if len(prefix) < len(src):
        return {src[len(prefix)]: -0.1}
    return {EOS: -0.1}


def head(src: tuple[int, ...]) -> tuple[int, ...]:
    """The first ``src[0] - 3`` tokens: long sentences starting with 4 end after one token."""
    return src[: src[0] - 3]


def head_table(src: tuple[int, ...], prefix: Prefix) -> dict[int, float]:
    target = head(src)
    if len(prefix) < len(target):
        return {target[len(prefix)]: -0.1}
    return {EOS: -0.1}


def random_table(seed: int) -> Table:
    """Normalised random log-probs, a deterministic function of (seed, src, prefix)."""

    def table(src: tuple[int, ...], prefix: Prefix) -> dict[int, float]:
        rng = np.random.default_rng([seed, len(src), *src, 99, *prefix])
        x = rng.normal(0.0, 2.0, VOCAB)
        lp = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
        return dict(enumerate(lp.tolist()))

    return table


def run(table: Table, sources, options, **kwargs) -> list[list[Hypothesis]]:
    return decode(
        FakeStepModel(table),
        [list(s) for s in sources],
        options=options,
        special=SPECIAL,
        max_top_k=VOCAB,
        **kwargs,
    )


def toks(hyps: list[Hypothesis]) -> list[tuple[int, ...]]:
    return [h.tokens for h in hyps]


def length_limit(options: DecodeOptions, src_len: int) -> int:
    """The documented limit, EOS included (written out here, not taken from the code)."""
    by_ratio = math.floor(options.max_length_ratio * src_len) + options.max_length_offset
    return max(1, min(options.max_length, by_ratio))


def written_bans(prefix: Prefix, options: DecodeOptions) -> set[int]:
    """The documented bans, written out: unk with ``ban_unk``; with ``block_ngram_repeat``
    n, each token that after the last n - 1 tokens would repeat an n-gram of ``prefix``
    free of ``ignore_when_blocking`` tokens."""
    out = {UNK} if options.ban_unk else set()
    n = options.block_ngram_repeat
    if n:
        context = prefix[len(prefix) - (n - 1) :] if n > 1 else ()
        grams = [prefix[i : i + n] for i in range(len(prefix) - n + 1)]
        for gram in grams:
            if gram[:-1] == context and not set(gram) & set(options.ignore_when_blocking):
                out.add(gram[-1])
    return out


def step_log_probs(
    table: Table,
    src: tuple[int, ...],
    prefix: Prefix,
    step: int,
    limit: int,
    min_length: int,
    options: DecodeOptions | None = None,
) -> np.ndarray:
    """Full-vocabulary log-probs of a step with the documented rules applied: no pad or
    bos, nor the tokens ``options`` ban; EOS alone (with its own log-prob) at the last
    allowed step, else none before ``min_length`` tokens."""
    lp = vector(table(src, prefix))
    lp[PAD] = lp[BOS] = NEG_INF
    if options is not None:
        lp[sorted(written_bans(prefix, options))] = NEG_INF
    if step >= limit - 1:
        keep = lp[EOS]
        lp[:] = NEG_INF
        lp[EOS] = keep
    elif step < min_length:
        lp[EOS] = NEG_INF
    return lp


def reference(table: Table, src: tuple[int, ...], options: DecodeOptions) -> list[Hypothesis]:
    """The documented search rules over the *full* vocabulary, one sentence, no batching:
    best ``2 * beam`` continuations, EOS among the first ``beam`` finishes a hypothesis,
    stop when ``beam`` have finished (beam 1 is greedy)."""
    if options.search == "eole":
        return eole_reference(table, src, options)
    beam = options.beam_size
    limit = length_limit(options, len(src))
    live: list[tuple[Prefix, np.float32]] = [((), np.float32(0.0))]
    finished: list[tuple[Prefix, float]] = []
    for step in range(limit):
        scored = []
        for row, (prefix, score) in enumerate(live):
            lp = step_log_probs(table, src, prefix, step, limit, options.min_length, options)
            for tok in range(VOCAB):
                scored.append((np.float32(score + lp[tok]), row, tok))
        scored.sort(key=lambda c: -c[0])
        new_live = []
        for rank, (score, row, tok) in enumerate(scored[: 2 * beam]):
            if score == NEG_INF:
                break
            if tok == EOS:
                if rank < beam:
                    finished.append((live[row][0], float(score)))
                continue
            new_live.append((live[row][0] + (tok,), score))
            if len(new_live) == beam:
                break
        if len(finished) >= beam or not new_live:
            break
        live = new_live
    penalty = options.length_penalty
    hyps = [Hypothesis(p, lp / (len(p) + 1) ** penalty, lp) for p, lp in finished]
    hyps.sort(key=lambda h: h.score, reverse=True)
    return hyps[: options.n_best]


def eole_reference(table: Table, src: tuple[int, ...], options: DecodeOptions) -> list[Hypothesis]:
    """Eole's search (``search="eole"``) by its documented rules, full vocabulary, one
    sentence. Greedy: argmax. Beam: the best ``beam`` continuations; the EOS ones finish,
    the rest stay live; done at a step whose best continuation is EOS once ``n_best``
    have finished, except at the step whose continuations reach the length limit (they
    end too and are ranked with the rest). Either way a hypothesis ended at the length
    limit has no EOS (its log-prob and length leave it out) and lengths count BOS."""
    beam = options.beam_size
    limit = length_limit(options, len(src))
    live: list[tuple[Prefix, np.float32 | float]] = [((), np.float32(0.0) if beam > 1 else 0.0)]
    finished: list[tuple[Prefix, float, int]] = []  # prefix, log-prob, scored length
    for step in range(limit):
        forced = step >= limit - 1
        scored = []
        for row, (prefix, score) in enumerate(live):
            lp = step_log_probs(table, src, prefix, step, limit, options.min_length, options)
            for tok in range(VOCAB):
                total = np.float32(score + lp[tok]) if beam > 1 else score + float(lp[tok])
                scored.append((total, row, tok))
        scored.sort(key=lambda c: -c[0])
        new_live, top_eos = [], False
        for rank, (total, row, tok) in enumerate(scored[:beam]):
            if total == NEG_INF:
                break
            prefix, before = live[row]
            if tok == EOS:
                top_eos = top_eos or rank == 0
                if forced:  # ends without EOS (a length never counts less than 1)
                    finished.append((prefix, float(before), max(len(prefix), 1) + 1))
                else:
                    finished.append((prefix, float(total), len(prefix) + 2))
                continue
            new_live.append((prefix + (tok,), total))
        reaches_limit = step + 1 >= limit - 1
        if (top_eos and len(finished) >= options.n_best and not reaches_limit) or not new_live:
            break
        live = new_live
    penalty = options.length_penalty
    hyps = [Hypothesis(p, lp / n**penalty, lp) for p, lp, n in finished]
    hyps.sort(key=lambda h: h.score, reverse=True)
    return hyps[: options.n_best]


def assert_same(got: list[Hypothesis], want: list[Hypothesis]) -> None:
    assert toks(got) == toks(want)
    for g, w in zip(got, want, strict=True):
        assert g.score == approx(w.score)
        assert g.log_prob == approx(w.log_prob)


# -- the named rules ----------------------------------------------------------------


def test_candidates_merge_eos_last_and_block_specials():
    topk_values = np.float32([[-0.5, -0.7], [-0.1, -0.9]])
    topk_ids = np.array([[5, 4], [0, 2]], dtype=np.int64)
    values, ids = candidates(topk_values, topk_ids, np.float32([-0.2, -0.3]), SPECIAL)
    assert values.shape == ids.shape == (2, 3)
    assert values.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_array_equal(ids, [[5, 4, EOS], [0, 2, EOS]])
    np.testing.assert_array_equal(
        values, np.float32([[-0.5, -0.7, -0.2], [NEG_INF, NEG_INF, -0.3]])
    )
    assert topk_values[1, 0] == np.float32(-0.1), "inputs must not be modified"


@pytest.mark.parametrize("min_length", [0, 1, 2, 50])
@pytest.mark.parametrize("step", [0, 1, 2, 3, 4])
def test_candidates_under_the_rules(step, min_length):
    """The loop's pipeline for one row: candidates, then the row's EOS rule."""
    limit = 5
    values, _ = candidates(
        np.float32([[-0.5, -0.7]]), np.array([[5, 4]]), np.float32([-0.2]), SPECIAL
    )
    rule = ScoringRules(min_length=min_length).eos_rule(step, limit)
    restrict(values, [rule])
    if step == limit - 1:  # forced, whatever min_length says
        np.testing.assert_array_equal(values, np.float32([[NEG_INF, NEG_INF, -0.2]]))
    elif step < min_length:
        np.testing.assert_array_equal(values, np.float32([[-0.5, -0.7, NEG_INF]]))
    else:
        np.testing.assert_array_equal(values, np.float32([[-0.5, -0.7, -0.2]]))


def test_pad_batch():
    ids, lengths = pad_batch([[4, 5, 6], [7], [8, 9]], PAD)
    np.testing.assert_array_equal(ids, [[4, 5, 6], [7, 0, 0], [8, 9, 0]])
    np.testing.assert_array_equal(lengths, [3, 1, 2])
    assert ids.dtype == lengths.dtype == np.int64


@pytest.mark.parametrize(
    ("options", "strategy", "top_k"),
    [
        (DecodeOptions(), GREEDY, 3),
        (DecodeOptions(search="eole"), GREEDY, 3),
        (DecodeOptions(beam_size=3), BEAM, 6),
        (DecodeOptions(beam_size=3, search="eole"), EOLE_BEAM, 3),
    ],
)
def test_make_search_picks_strategy(options, strategy, top_k):
    assert strategy_for(options) is strategy
    search = make_search(4, options, SPECIAL)
    assert search.strategy is strategy and search.top_k == top_k
    assert search.rules == ScoringRules.of(options)
    assert search.limit == length_limit(options, 4)
    assert (search.rows, search.prev_tokens, search.parents, search.step) == (1, [BOS], [0], 0)


# -- scripted searches --------------------------------------------------------------

# Greedy takes 4 (-0.5) whose continuations are poor; 5 (-0.9) leads to 8 (-0.2).
GARDEN_PATH = scripted(
    {
        (): {4: -0.5, 5: -0.9, EOS: -2.0},
        (4,): {6: -1.5, 7: -1.6, EOS: -2.5},
        (5,): {8: -0.2, EOS: -2.0},
        (4, 6): {EOS: -0.1},
        (4, 7): {EOS: -0.2},
        (5, 8): {EOS: -0.05},
    }
)
SRC = (4, 5, 6)


def test_greedy_takes_the_garden_path():
    (hyps,) = run(GARDEN_PATH, [SRC], DecodeOptions())
    assert toks(hyps) == [(4, 6)]
    assert hyps[0].log_prob == approx(-2.1)
    assert hyps[0].score == approx(-2.1 / 3)
    assert hyps[0].attention is None


@pytest.mark.parametrize(
    ("beam", "expected"),
    [
        (2, [((5, 8), -1.15), ((4, 6), -2.1)]),
        (3, [((5, 8), -1.15), ((4, 6), -2.1), ((4, 7), -2.3)]),
    ],
)
def test_beam_finds_the_better_sequence(beam, expected):
    (hyps,) = run(GARDEN_PATH, [SRC], DecodeOptions(beam_size=beam, n_best=beam))
    assert toks(hyps) == [t for t, _ in expected]
    assert [h.log_prob for h in hyps] == [approx(lp) for _, lp in expected]
    assert [h.score for h in hyps] == [approx(lp / (len(t) + 1)) for t, lp in expected]
    assert hyps[0].score > run(GARDEN_PATH, [SRC], DecodeOptions())[0][0].score


@pytest.mark.parametrize("n_best", [1, 2, 3])
def test_n_best_is_a_prefix_of_the_ranking(n_best):
    (hyps,) = run(GARDEN_PATH, [SRC], DecodeOptions(beam_size=3, n_best=n_best))
    assert toks(hyps) == [(5, 8), (4, 6), (4, 7)][:n_best]
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


# A short hypothesis (4) finishes at -0.8; a long one (5 7 8) at -0.9.
LENGTHS = scripted(
    {
        (): {4: -0.3, 5: -0.4},
        (4,): {EOS: -0.5, 6: -2.0},
        (5,): {7: -0.1},
        (4, 6): {9: -0.1},
        (5, 7): {8: -0.1},
        (5, 7, 8): {EOS: -0.3},
    }
)


@pytest.mark.parametrize(
    ("penalty", "expected"),
    [
        (0.0, [((4,), -0.8, -0.8), ((5, 7, 8), -0.9, -0.9)]),
        (1.0, [((5, 7, 8), -0.9, -0.225), ((4,), -0.8, -0.4)]),
    ],
)
def test_length_penalty_changes_the_winner(penalty, expected):
    options = DecodeOptions(beam_size=2, n_best=2, length_penalty=penalty)
    (hyps,) = run(LENGTHS, [SRC], options)
    assert toks(hyps) == [t for t, _, _ in expected]
    assert [h.log_prob for h in hyps] == [approx(lp) for _, lp, _ in expected]
    assert [h.score for h in hyps] == [approx(s) for _, _, s in expected]


MIN_LENGTH = scripted(
    {
        (): {4: -1.0, EOS: -0.1},
        (4,): {EOS: -0.2, 5: -1.0},
        (4, 5): {EOS: -0.1},
    }
)


@pytest.mark.parametrize(
    ("min_length", "tokens", "log_prob"),
    [(0, (), -0.1), (1, (4,), -1.2), (2, (4, 5), -2.1), (3, (4, 5, 4), -2.0 + filler(4) - 0.01)],
)
def test_greedy_eos_banned_before_min_length(min_length, tokens, log_prob):
    (hyps,) = run(MIN_LENGTH, [SRC], DecodeOptions(min_length=min_length))
    assert toks(hyps) == [tokens]
    assert hyps[0].log_prob == approx(log_prob)
    assert hyps[0].score == approx(log_prob / (len(tokens) + 1))


@pytest.mark.parametrize("beam", [2, 3])
@pytest.mark.parametrize("min_length", [0, 1, 2, 3])
def test_beam_eos_banned_before_min_length(beam, min_length):
    options = DecodeOptions(beam_size=beam, n_best=beam, min_length=min_length)
    (hyps,) = run(MIN_LENGTH, [SRC], options)
    assert len(hyps) == beam
    assert all(len(h.tokens) >= min_length for h in hyps)
    best = {0: (), 1: (4,), 2: (4, 5), 3: (4, 5, 4)}[min_length]
    assert hyps[0].tokens == best
    assert_same(hyps, reference(MIN_LENGTH, SRC, options))


def always(entries: dict[int, float]) -> Table:
    return lambda src, prefix: entries


def test_greedy_eos_forced_at_the_length_limit():
    table = always({4: -0.1, EOS: -5.0})
    (hyps,) = run(table, [SRC], DecodeOptions(max_length=3))
    assert toks(hyps) == [(4, 4)]
    assert hyps[0].log_prob == approx(-5.2)
    assert hyps[0].score == approx(-5.2 / 3)


@pytest.mark.parametrize(
    ("src_len", "ratio", "offset", "max_length"),
    [(1, 2.0, 0, 256), (2, 1.0, 1, 256), (3, 1.5, 2, 256), (8, 2.0, 10, 4), (5, 0.0, 0, 256)],
)
@pytest.mark.parametrize("beam", [1, 2, 3])
def test_eos_forced_at_length_limit(src_len, ratio, offset, max_length, beam):
    options = DecodeOptions(
        beam_size=beam,
        n_best=beam,
        max_length=max_length,
        max_length_ratio=ratio,
        max_length_offset=offset,
    )
    limit = length_limit(options, src_len)
    table = always({4: -0.1, 5: -0.2, 6: -0.3, EOS: -5.0})
    (hyps,) = run(table, [tuple([4] * src_len)], options)
    assert hyps[0].tokens == (4,) * (limit - 1)
    assert hyps[0].log_prob == approx(-0.1 * (limit - 1) - 5.0)
    assert all(len(h.tokens) == limit - 1 for h in hyps)


def test_beam_eos_forced_at_length_limit_exact():
    table = always({4: -0.1, 5: -0.2, EOS: -5.0})
    (hyps,) = run(table, [SRC], DecodeOptions(beam_size=2, n_best=2, max_length=3))
    assert toks(hyps) == [(4, 4), (4, 5)]
    assert [h.log_prob for h in hyps] == [approx(-5.2), approx(-5.3)]
    assert [h.score for h in hyps] == [approx(-5.2 / 3), approx(-5.3 / 3)]


# -- the scoring rules through every strategy ---------------------------------------

STRATEGIES = {
    "greedy": DecodeOptions(),
    "beam": DecodeOptions(beam_size=3, n_best=3),
    "eole-greedy": DecodeOptions(search="eole"),
    "eole-beam": DecodeOptions(beam_size=3, n_best=3, search="eole"),
}


@pytest.mark.parametrize("min_length", [0, 2, 4])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_blocks_eos_before_min_length(strategy, min_length):
    # EOS is by far the likeliest token: hypotheses end as soon as the rule lets them
    table = always({EOS: -0.01, 4: -2.0, 5: -2.5, 6: -3.0})
    options = dataclasses.replace(STRATEGIES[strategy], min_length=min_length)
    (hyps,) = run(table, [SRC], options)
    assert len(hyps) == options.n_best
    assert all(len(h.tokens) >= min_length for h in hyps)
    assert hyps[0].tokens == (4,) * min_length
    assert hyps[0].log_prob == approx(-2.0 * min_length - 0.01)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_forces_eos_at_the_length_limit(strategy):
    table = always({4: -0.1, 5: -0.2, 6: -0.3, EOS: -5.0})
    # forcing wins over min_length
    options = dataclasses.replace(STRATEGIES[strategy], max_length=5, min_length=50)
    rules = ScoringRules.of(options)
    (hyps,) = run(table, [SRC], options)
    assert len(hyps) == options.n_best
    assert all(len(h.tokens) == 4 for h in hyps)
    assert hyps[0].tokens == (4,) * 4
    eos = rules.eos_scored(True)  # Eole ends it without EOS
    assert eos is (options.search == "standard")
    assert hyps[0].log_prob == approx(-0.4 + (-5.0 if eos else 0.0))
    for h in hyps:
        assert h.score == rules.score(h.log_prob, 4, eos=eos)


@pytest.mark.parametrize("strategy", [*STRATEGIES, "sampling"])
def test_a_model_that_gives_eos_minus_inf_still_ends_at_the_limit(strategy):
    """A converted model may mask EOS outright: at the limit the row still ends (its EOS
    counts as FORCED_EOS_FLOOR, restrict()), with the tokens before it; before, argmax
    took the first banned column and the sentence ran on until its deadline."""

    def table(src: tuple[int, ...], prefix: Prefix) -> dict[int, float]:
        if len(prefix) > 20:  # far past the limit: fail here rather than decode forever
            raise AssertionError("the sentence went on past its length limit")
        return {4: -0.1, 5: -0.2, 6: -0.3, EOS: -np.inf}

    sampling = DecodeOptions(sampling_topk=3, seed=7)
    base = sampling if strategy == "sampling" else STRATEGIES[strategy]
    options = dataclasses.replace(base, max_length=5)
    ((best, *_),) = run(table, [SRC], options)
    assert len(best.tokens) == 4 and set(best.tokens) <= {4, 5, 6}
    if ScoringRules.of(options).eos_scored(True):
        # finite, so JSON and protobuf carry it
        assert best.log_prob == pytest.approx(float(FORCED_EOS_FLOOR), rel=1e-6)
    else:  # Eole ends it without scoring the EOS
        assert best.log_prob == approx(-0.4)


@pytest.mark.parametrize("penalty", [0.0, 0.6, 1.0, 2.0])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_scores_by_the_length_penalty(strategy, penalty):
    options = dataclasses.replace(STRATEGIES[strategy], length_penalty=penalty, max_length=7)
    rules = ScoringRules.of(options)
    bos = 1 if options.search == "eole" else 0
    forced_ends = 0
    sources = random_sources(4, 8)
    for src, hyps in zip(sources, run(random_table(3), sources, options), strict=True):
        limit = rules.length_limit(len(src))
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            forced = len(h.tokens) == limit - 1  # only the forced EOS ends one there
            forced_ends += forced
            eos = rules.eos_scored(forced)
            assert h.score == rules.score(h.log_prob, len(h.tokens), eos=eos)
            length = max(len(h.tokens) + eos, 1) + bos
            assert h.score == approx(h.log_prob / length**penalty)
    assert forced_ends, "no hypothesis reached the length limit: the test lost its point"


# At step 1 the ranking is: EOS after 4 (rank 0), 4 6 (rank 1), EOS after 5 (rank 2, beyond
# the beam: not finished although its score would be second best), 5 7 (rank 3).
EOS_BEYOND_BEAM = scripted(
    {
        (): {4: -0.1, 5: -0.2},
        (4,): {EOS: -0.05, 6: -0.2},
        (5,): {EOS: -0.15, 7: -0.2},
        (4, 6): {EOS: -1.0},
        (5, 7): {EOS: -1.0},
    }
)


def test_eos_ranked_beyond_the_beam_is_not_finalized():
    (hyps,) = run(EOS_BEYOND_BEAM, [SRC], DecodeOptions(beam_size=2, n_best=2))
    assert toks(hyps) == [(4,), (4, 6)]
    assert [h.log_prob for h in hyps] == [approx(-0.15), approx(-1.3)]
    assert [h.score for h in hyps] == [approx(-0.075), approx(-1.3 / 3)]
    # Sanity of the script: (5,) + EOS would have outranked (4, 6) had it been finished.
    assert hyps[1].score < (-0.2 - 0.15) / 2


LEAKY = scripted(
    {
        (): {PAD: 0.0, BOS: -0.01, 4: -0.5, 5: -0.6},
        (4,): {BOS: 0.0, PAD: -0.01, EOS: -0.6, 6: -0.4},
        (5,): {PAD: 0.0, EOS: -0.45, 7: -0.35},
        (4, 6): {PAD: 0.0, BOS: 0.0, EOS: -0.1},
    }
)


def _strip_specials(table: Table) -> Table:
    def stripped(src, prefix):
        return {t: v for t, v in table(src, prefix).items() if t not in (PAD, BOS)}

    return stripped


@pytest.mark.parametrize("beam", [2, 3])
def test_pad_and_bos_never_emitted_by_beam(beam):
    options = DecodeOptions(beam_size=beam, n_best=beam)
    (hyps,) = decode(
        FakeStepModel(LEAKY, leak_specials=True), [list(SRC)], options=options, special=SPECIAL
    )
    assert hyps, "no hypothesis"
    for h in hyps:
        assert PAD not in h.tokens and BOS not in h.tokens
        assert np.isfinite(h.score)
    assert_same(hyps, run(_strip_specials(LEAKY), [SRC], options)[0])


def test_pad_and_bos_never_emitted_by_greedy_when_eos_allowed():
    # Greedy asks for top_k=1; with EOS allowed the leaked pad is replaced by EOS.
    table = scripted({(): {4: -0.5}, (4,): {PAD: 0.0, EOS: -0.3, 6: -0.4}})
    (hyps,) = decode(
        FakeStepModel(table, leak_specials=True),
        [list(SRC)],
        options=DecodeOptions(),
        special=SPECIAL,
    )
    assert hyps[0].tokens == (4,)
    assert hyps[0].log_prob == approx(-0.8)


def test_pad_and_bos_never_emitted_by_greedy_when_eos_banned():
    (hyps,) = decode(
        FakeStepModel(LEAKY, leak_specials=True),
        [list(SRC)],
        options=DecodeOptions(),
        special=SPECIAL,
    )
    assert PAD not in hyps[0].tokens and BOS not in hyps[0].tokens
    assert np.isfinite(hyps[0].log_prob)


# -- random tables against the full-vocabulary reference --------------------------

OPTION_SETS = [
    DecodeOptions(max_length=8),
    DecodeOptions(beam_size=2, n_best=2, max_length=8),
    DecodeOptions(beam_size=3, n_best=3, max_length=9, min_length=2),
    DecodeOptions(beam_size=3, n_best=1, length_penalty=0.0, max_length=7),
    DecodeOptions(
        beam_size=2, n_best=1, length_penalty=2.0, max_length_ratio=1.0, max_length_offset=2
    ),
]
BAN_OPTION_SETS = [
    DecodeOptions(max_length=9, ban_unk=True),
    DecodeOptions(max_length=9, block_ngram_repeat=1),
    DecodeOptions(max_length=9, block_ngram_repeat=2, ban_unk=True),
    DecodeOptions(beam_size=2, n_best=2, max_length=9, block_ngram_repeat=1, ban_unk=True),
    DecodeOptions(beam_size=3, n_best=2, max_length=9, block_ngram_repeat=2, min_length=3),
    DecodeOptions(
        beam_size=3, n_best=3, max_length=9, block_ngram_repeat=2, ignore_when_blocking=(4, 5)
    ),
    DecodeOptions(search="eole", max_length=9, min_length=0, block_ngram_repeat=2, ban_unk=True),
    DecodeOptions(
        beam_size=3, n_best=2, search="eole", max_length=9, min_length=0, block_ngram_repeat=1
    ),
    DecodeOptions(
        beam_size=2,
        n_best=2,
        search="eole",
        max_length=9,
        block_ngram_repeat=3,
        ignore_when_blocking=(6,),
        ban_unk=True,
    ),
]
EOLE_OPTION_SETS = [
    DecodeOptions(search="eole", max_length=6, min_length=0),
    DecodeOptions(beam_size=2, n_best=2, search="eole", max_length=6, min_length=0),
    DecodeOptions(beam_size=3, n_best=2, search="eole", max_length=9, min_length=2),
    DecodeOptions(
        beam_size=3,
        n_best=1,
        search="eole",
        length_penalty=0.5,
        max_length_ratio=1.0,
        max_length_offset=1,
    ),
]


def random_sources(seed: int, n: int, max_len: int = 8) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    return [
        tuple(int(t) for t in rng.integers(4, VOCAB, rng.integers(1, max_len + 1)))
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "options",
    OPTION_SETS + EOLE_OPTION_SETS + BAN_OPTION_SETS,
    ids=lambda o: f"{o.search}-beam{o.beam_size}-unk{o.ban_unk:d}-block{o.block_ngram_repeat}",
)
def test_random_tables_match_reference(options):
    for seed in range(3):
        table = random_table(seed)
        sources = random_sources(seed, 6)
        got = run(table, sources, options)
        for src, hyps in zip(sources, got, strict=True):
            assert_same(hyps, reference(table, src, options))


def test_return_attention_rows_are_uniform_over_real_positions():
    sources = [(4,), (5, 6, 7), (8, 9, 4, 5, 6, 7, 8)]
    for beam in (1, 2):
        options = DecodeOptions(beam_size=beam, n_best=beam, return_attention=True)
        for src, hyps in zip(sources, run(copy_table, sources, options), strict=True):
            for h in hyps:
                assert h.attention.shape == (len(h.tokens) + 1, len(src))
                np.testing.assert_allclose(h.attention, 1.0 / len(src))


@pytest.mark.parametrize("beam", [1, 3])
def test_coverage_penalty_scores_the_attention_sums(beam):
    # uniform attention: each position gets (steps / src_len) in total
    sources = [(4,), (5, 6, 7), (8, 9, 4, 5, 6, 7, 8)]
    options = DecodeOptions(beam_size=beam, n_best=beam, coverage_penalty=0.3)
    plain = run(random_table(1), sources, dataclasses.replace(options, coverage_penalty=0.0))
    rules = ScoringRules.of(options)
    for src, hyps in zip(sources, run(random_table(1), sources, options), strict=True):
        for h in hyps:
            coverage = np.full(len(src), (len(h.tokens) + 1) / len(src))
            assert h.score == approx(rules.score(h.log_prob, len(h.tokens), coverage=coverage))
    assert plain  # beta 0: the existing tests cover that nothing changes


# -- the driver loop ----------------------------------------------------------------


def drive(loop: DecodeLoop, results: dict, max_steps: int = 500) -> int:
    steps = 0
    while loop.active:
        for handle, search in loop.step():
            assert handle not in results
            results[handle] = search.results()
        steps += 1
        assert steps < max_steps
    return steps


def alone(table: Table, src: tuple[int, ...], options: DecodeOptions) -> list[Hypothesis]:
    loop = DecodeLoop(FakeStepModel(table), SPECIAL)
    loop.add([list(src)], [make_search(len(src), options, SPECIAL)], ["x"])
    results: dict = {}
    drive(loop, results)
    return results["x"]


def test_loop_mixes_greedy_and_beam_in_one_call_per_step():
    table = random_table(7)
    a, b, c = (4, 5, 6, 7), (8, 9), (6, 6, 6, 4, 5)
    opts = {
        "a": DecodeOptions(max_length=10),
        "b": DecodeOptions(beam_size=3, n_best=3, max_length=10),
        "c": DecodeOptions(beam_size=2, n_best=2, max_length=10, min_length=2),
    }
    model = FakeStepModel(table)
    loop = DecodeLoop(model, SPECIAL)
    srcs = {"a": a, "b": b, "c": c}
    loop.add(
        [list(s) for s in srcs.values()],
        [make_search(len(s), opts[k], SPECIAL) for k, s in srcs.items()],
        list(srcs),
    )
    assert loop.live_rows == 3
    results: dict = {}
    steps = drive(loop, results)
    assert len(model.calls) == steps
    assert model.calls[0] == (3, 6), "one call for all rows, top_k = the widest search's"
    for k, src in srcs.items():
        assert_same(results[k], alone(table, src, opts[k]))
        assert_same(results[k], reference(table, src, opts[k]))
    assert loop.live_rows == 0 and loop.step() == []


@pytest.mark.parametrize("beam", [1, 2, 3])
@pytest.mark.parametrize("delay", [1, 3])
def test_loop_admits_a_sentence_mid_way(beam, delay):
    table = random_table(11)
    first, later = (4, 5, 6, 7, 8, 9), (9, 8)
    opt_first = DecodeOptions(beam_size=3, n_best=3, min_length=6, max_length=12)
    opt_later = DecodeOptions(beam_size=beam, n_best=beam, max_length=10)
    loop = DecodeLoop(FakeStepModel(table), SPECIAL)
    loop.add([list(first)], [make_search(len(first), opt_first, SPECIAL)], ["first"])
    results: dict = {}
    for _ in range(delay):
        for handle, search in loop.step():
            results[handle] = search.results()
    assert "first" not in results, "min_length keeps the first sentence running"
    loop.add([list(later)], [make_search(len(later), opt_later, SPECIAL)], ["later"])
    drive(loop, results)
    assert_same(results["first"], reference(table, first, opt_first))
    assert_same(results["later"], reference(table, later, opt_later))
    assert_same(results["later"], alone(table, later, opt_later))


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_loop_compacts_the_memory_pool(beam):
    # 12 sentences of 12..1 tokens; the six longest start with 4 and end after one token,
    # so after two steps 5 of 12 slots are live and the pool shrinks in rows and width.
    cycle = [5, 6, 7, 8, 9]
    sources = [(4 if n > 6 else 9, *np.resize(cycle, n - 1).tolist()) for n in range(12, 0, -1)]
    options = DecodeOptions(beam_size=beam, n_best=1, return_attention=True)
    loop = DecodeLoop(FakeStepModel(head_table), SPECIAL)
    loop.add(
        [list(s) for s in sources],
        [make_search(len(s), options, SPECIAL) for s in sources],
        list(range(len(sources))),
    )
    late = (9, 8, 7, 6, 5, 4, 9, 8, 7, 6, 5, 4, 9, 8)
    results: dict = {}
    pool, width = [], []
    added = False
    while loop.active:
        for handle, search in loop.step():
            results[handle] = search.results()
        if loop.active:
            pool.append(loop._memory.shape[0])
            width.append(loop._memory.shape[1])
        if not added and pool[-1] < 12:
            # a long sentence joins the compacted, narrowed pool
            assert width[-1] == 6, "compaction should drop padding columns"
            loop.add([list(late)], [make_search(len(late), options, SPECIAL)], ["late"])
            assert loop._memory.shape[1] == len(late)
            added = True
    assert added, "the pool was never compacted"
    assert pool[0] == 12 and min(pool) <= 5
    for i, src in enumerate(sources):
        (h,) = results[i]
        assert h.tokens == head(src)
        assert h.log_prob == approx(-0.1 * (len(h.tokens) + 1))
        assert h.attention.shape == (len(h.tokens) + 1, len(src))
        np.testing.assert_allclose(h.attention, 1.0 / len(src))
    (h,) = results["late"]
    assert h.tokens == head(late) and h.attention.shape == (7, len(late))


@pytest.mark.parametrize("beam", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_decode_batch_size_smaller_than_sentences(beam, batch_size):
    table = random_table(5)
    sources = random_sources(21, 10)
    options = DecodeOptions(beam_size=beam, n_best=beam, max_length=9)
    model = FakeStepModel(table)
    got = decode(
        model, [list(s) for s in sources], options=options, special=SPECIAL, batch_size=batch_size
    )
    assert len(got) == len(sources)
    for src, hyps in zip(sources, got, strict=True):
        assert_same(hyps, reference(table, src, options))
    assert max(rows for rows, _ in model.calls) <= batch_size * beam


def test_decode_per_sentence_options_and_input_order():
    table = random_table(3)
    sources = random_sources(8, 7)
    options = [OPTION_SETS[i % len(OPTION_SETS)] for i in range(len(sources))]
    got = run(table, sources, options, batch_size=2)
    for src, opt, hyps in zip(sources, options, got, strict=True):
        assert 1 <= len(hyps) <= opt.n_best
        assert_same(hyps, reference(table, src, opt))


def test_decode_copy_sentences_of_many_lengths():
    sources = [tuple([4 + (i % 6)] * n) for i, n in enumerate([1, 9, 2, 8, 3, 7, 4, 6, 5])]
    for beam in (1, 2, 3):
        got = run(copy_table, sources, DecodeOptions(beam_size=beam), batch_size=4)
        assert [hyps[0].tokens for hyps in got] == sources


def test_decode_no_sentences():
    assert run(copy_table, [], DecodeOptions()) == []


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_loop_drop_stops_a_sentence_and_keeps_the_others(beam):
    table = random_table(13)
    sources = {"a": (4, 5, 6, 7), "b": (8, 9, 4), "c": (5, 5, 5, 5, 5, 5)}
    options = DecodeOptions(beam_size=beam, n_best=beam, min_length=4, max_length=10)
    loop = DecodeLoop(FakeStepModel(table), SPECIAL)
    loop.add(
        [list(s) for s in sources.values()],
        [make_search(len(s), options, SPECIAL) for s in sources.values()],
        list(sources),
    )
    results: dict = {}
    for _ in range(2):
        assert loop.step() == []  # min_length 4: nobody finishes yet
    loop.drop({"b"})
    assert [a.handle for a in loop.active] == ["a", "c"]
    drive(loop, results)
    assert set(results) == {"a", "c"}
    for k in ("a", "c"):
        assert_same(results[k], reference(table, sources[k], options))


def test_loop_drop_everything_empties_the_pool():
    loop = DecodeLoop(FakeStepModel(copy_table), SPECIAL)
    loop.add([[4, 5], [6]], [make_search(n, DecodeOptions(), SPECIAL) for n in (2, 1)], [0, 1])
    loop.step()
    loop.drop({0, 1})
    assert loop.active == [] and loop._memory is None and loop.live_rows == 0
    assert loop.step() == []
    loop.add([[7, 8]], [make_search(2, DecodeOptions(), SPECIAL)], ["again"])
    results: dict = {}
    drive(loop, results)
    assert results["again"][0].tokens == (7, 8)


@pytest.mark.parametrize("options", OPTION_SETS[:3], ids=lambda o: f"beam{o.beam_size}")
def test_stable_prefix_only_grows_and_ends_as_the_best(options):
    for seed in range(4):
        table = random_table(100 + seed)
        src = random_sources(seed, 1)[0]
        loop = DecodeLoop(FakeStepModel(table), SPECIAL)
        search = make_search(len(src), options, SPECIAL)
        loop.add([list(src)], [search], ["x"])
        assert search.stable_prefix() == ()
        prefixes = []
        while loop.active:
            loop.step()
            prefixes.append(search.stable_prefix())
        best = search.results()[0].tokens
        assert prefixes[-1] == best
        for before, after in zip(prefixes, prefixes[1:], strict=False):
            assert after[: len(before)] == before, "a streamed prefix was taken back"


def test_banning_sentences_do_not_change_their_batch_mates():
    """Sentences that ban tokens widen the step's top-k; mixed in one batch with others
    (greedy, beam, standard and Eole), every sentence decodes as it does alone."""
    table = random_table(7)
    sources = random_sources(7, 8)
    mixes = [
        DecodeOptions(max_length=9),
        DecodeOptions(max_length=9, block_ngram_repeat=1, ban_unk=True),
        DecodeOptions(beam_size=3, n_best=3, max_length=9),
        DecodeOptions(beam_size=3, n_best=3, max_length=9, block_ngram_repeat=2),
        DecodeOptions(beam_size=2, n_best=2, search="eole", max_length=9, min_length=0),
        DecodeOptions(beam_size=2, n_best=2, search="eole", max_length=9, ban_unk=True),
        DecodeOptions(max_length=9, ban_unk=True),
        DecodeOptions(beam_size=2, max_length=9, block_ngram_repeat=1, ignore_when_blocking=(4,)),
    ]
    model = FakeStepModel(table)
    together = decode(
        model, [list(s) for s in sources], options=mixes, special=SPECIAL, max_top_k=VOCAB
    )
    assert max(k for _, k in model.calls) > 2 * 3  # a ban widened some step
    for src, options, got in zip(sources, mixes, together, strict=True):
        assert_same(got, run(table, [src], options)[0])
        assert_same(got, reference(table, src, options))


def test_ban_unk_takes_the_next_best_token():
    script = {(): {UNK: -0.1, 5: -2.0}, (5,): {EOS: -0.1}, (UNK,): {EOS: -0.1}}
    for beam in (1, 3):
        plain = run(scripted(script), [(4, 4)], DecodeOptions(beam_size=beam))[0][0]
        banned = run(scripted(script), [(4, 4)], DecodeOptions(beam_size=beam, ban_unk=True))
        assert plain.tokens == (UNK,)
        assert banned[0][0].tokens == (5,)
        assert banned[0][0].log_prob == approx(-2.1)


# -- random sampling -----------------------------------------------------------------


def written_sample(
    table: Table, src: tuple[int, ...], options: DecodeOptions, sentence: int, sample: int = 0
):
    """The documented sampler, written out over the full vocabulary: candidates ranked as
    the graph gives them (non-EOS tokens by log-prob, lower id first on ties, then EOS;
    a stable sort keeps a token before an equal EOS), the ``sampling_topk`` best kept,
    one uniform draw of the sample's generator against the cumulative
    ``softmax(log_prob / T)``; the generator keyed by the seed, the sentence's index and,
    past the first sample, the sample's."""
    rng = np.random.default_rng([options.seed, sentence] + ([sample] if sample else []))
    limit = length_limit(options, len(src))
    prefix: Prefix = ()
    total = 0.0
    for step in range(limit):
        lp = step_log_probs(table, src, prefix, step, limit, options.min_length, options)
        tokens = sorted((t for t in range(VOCAB) if t != EOS), key=lambda t: (-lp[t], t))
        ranked = sorted([*tokens, EOS], key=lambda t: -lp[t])[: options.sampling_topk]
        logits = np.array([lp[t] for t in ranked], dtype=np.float64)
        weights = np.exp((logits - logits[0]) / options.sampling_temperature)
        cumulative = np.cumsum(weights / weights.sum())
        if options.sampling_topp < 1.0:  # the fewest best whose probabilities reach p
            keep = next(
                (n + 1 for n, c in enumerate(cumulative) if c >= options.sampling_topp),
                len(ranked),
            )
            ranked, weights = ranked[:keep], weights[:keep]
            cumulative = np.cumsum(weights / weights.sum())
        pick = ranked[
            min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(ranked) - 1)
        ]
        if pick == EOS:
            if not (options.search == "eole" and step >= limit - 1):  # Eole: no EOS there
                total += float(lp[pick])
            break
        total += float(lp[pick])
        prefix += (pick,)
    return prefix, total


SAMPLING_SETS = [
    DecodeOptions(sampling_topk=3, seed=11, max_length=9),
    DecodeOptions(sampling_topk=VOCAB, seed=12, max_length=9, sampling_temperature=2.0),
    DecodeOptions(sampling_topk=4, seed=13, max_length=9, min_length=2, sampling_temperature=0.5),
    DecodeOptions(sampling_topk=5, seed=14, max_length=9, block_ngram_repeat=1, ban_unk=True),
    DecodeOptions(sampling_topk=2, seed=15, search="eole", max_length=9, min_length=0),
    DecodeOptions(sampling_topk=VOCAB, seed=16, max_length=9, sampling_topp=0.6),
    DecodeOptions(
        sampling_topk=5, seed=17, max_length=9, sampling_topp=0.9, sampling_temperature=1.5
    ),
]


@pytest.mark.parametrize(
    "options", SAMPLING_SETS, ids=lambda o: f"top{o.sampling_topk}-p{o.sampling_topp}"
)
def test_sampling_draws_as_documented(options):
    table = random_table(options.seed)
    sources = random_sources(options.seed, 12)
    got = run(table, sources, options)
    for i, (src, hyps) in enumerate(zip(sources, got, strict=True)):
        tokens, log_prob = written_sample(table, src, options, i)
        assert len(hyps) == 1 and hyps[0].tokens == tokens
        assert hyps[0].log_prob == approx(log_prob)
    greedy = run(table, sources, dataclasses.replace(options, sampling_topk=0))
    assert [h[0].tokens for h in got] != [h[0].tokens for h in greedy]  # it did sample


@pytest.mark.parametrize("options", SAMPLING_SETS[:5], ids=lambda o: f"top{o.sampling_topk}")
def test_several_samples_each_draw_as_documented(options):
    """beam_size 4: four samples a sentence, each with a generator of its own (the first
    keyed as one sample's, so it draws what beam_size 1 draws); n_best 4 returns all of
    them best score first, n_best 2 the two best."""
    table = random_table(options.seed)
    sources = random_sources(options.seed, 8)
    several = dataclasses.replace(options, beam_size=4, n_best=4)
    got = run(table, sources, several)
    two = run(table, sources, dataclasses.replace(several, n_best=2))
    for i, (src, hyps) in enumerate(zip(sources, got, strict=True)):
        want = [written_sample(table, src, options, i, sample) for sample in range(4)]
        assert sorted((h.tokens, round(h.log_prob, 4)) for h in hyps) == sorted(
            (tokens, round(log_prob, 4)) for tokens, log_prob in want
        )
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert [h.tokens for h in two[i]] == [h.tokens for h in hyps[:2]]
    # the first sample is the one-sample search's draw; the others differ from it
    one = run(table, sources, options)
    firsts = [written_sample(table, src, options, i)[0] for i, src in enumerate(sources)]
    assert [h[0].tokens for h in one] == firsts
    assert any(len({h.tokens for h in hyps}) > 1 for hyps in got)


def test_samples_of_a_prefixed_sentence_each_continue_the_prefix():
    """The prefix is decoded on one row; the first drawn step spreads it over the
    samples, which then draw on their own."""
    table = random_table(6)
    sources = random_sources(6, 6)
    options = DecodeOptions(sampling_topk=VOCAB, seed=6, max_length=9, beam_size=3, n_best=3)
    prefix = (4, 5)
    got = run(table, sources, options, prefixes=[prefix] * len(sources))
    for hyps in got:
        assert len(hyps) == 3 and all(h.tokens[:2] == prefix for h in hyps)
    assert any(len({h.tokens for h in hyps}) > 1 for hyps in got)
    again = run(table, sources, options, prefixes=[prefix] * len(sources))
    assert [toks(h) for h in again] == [toks(h) for h in got]


def test_sampling_frequencies_follow_the_tempered_distribution():
    probs = {5: 0.5, 6: 0.3, 7: 0.2}
    script = {(): {t: math.log(p) for t, p in probs.items()}}
    sources = [(4, 4)] * 3000  # 3000 sentences of one request: 3000 independent draws
    for temperature in (1.0, 2.0):
        options = DecodeOptions(sampling_topk=3, seed=5, sampling_temperature=temperature)
        got = run(scripted(script), sources, options, batch_size=256)
        first = [h[0].tokens[0] for h in got]
        tempered = {t: p ** (1 / temperature) for t, p in probs.items()}
        norm = sum(tempered.values())
        for tok, p in tempered.items():
            assert abs(first.count(tok) / len(first) - p / norm) < 0.03, (temperature, tok)
    # the nucleus of 0.7: 5 and 6 (0.5 + 0.3 reach it), renormalised; 7 never
    nucleus = run(scripted(script), sources, DecodeOptions(sampling_topk=3, sampling_topp=0.7))
    first = [h[0].tokens[0] for h in nucleus]
    assert first.count(7) == 0
    assert abs(first.count(5) / len(first) - 0.625) < 0.03


def test_sampling_is_greedy_at_topk_1_and_reproducible_by_seed():
    table = random_table(3)
    sources = random_sources(3, 10)
    greedy = run(table, sources, DecodeOptions(max_length=9))
    assert run(table, sources, DecodeOptions(max_length=9, sampling_topk=1, seed=4)) == greedy
    a = run(table, sources, DecodeOptions(max_length=9, sampling_topk=6, seed=4))
    assert run(table, sources, DecodeOptions(max_length=9, sampling_topk=6, seed=4)) == a
    b = run(table, sources, DecodeOptions(max_length=9, sampling_topk=6, seed=5))
    assert [h[0].tokens for h in a] != [h[0].tokens for h in b]


@pytest.mark.parametrize("samples", [1, 3])
def test_a_sampled_sentence_does_not_depend_on_its_batch_mates(samples):
    table = random_table(8)
    sources = random_sources(8, 6)
    options = DecodeOptions(
        max_length=9, sampling_topk=5, seed=21, beam_size=samples, n_best=samples
    )
    alone = []
    for i, src in enumerate(sources):
        loop = DecodeLoop(FakeStepModel(table), SPECIAL, max_top_k=VOCAB)
        loop.add([list(src)], [make_search(len(src), options, SPECIAL, sentence=i)], [i])
        while loop.active:
            done = loop.step()
        alone.append(done[0][1].results())
    mates = [
        DecodeOptions(max_length=9, beam_size=3, n_best=2),
        DecodeOptions(max_length=9, block_ngram_repeat=1),
        DecodeOptions(max_length=9, sampling_topk=VOCAB, seed=99),
    ]
    loop = DecodeLoop(FakeStepModel(table), SPECIAL, max_top_k=VOCAB)
    searches = [make_search(len(s), options, SPECIAL, sentence=i) for i, s in enumerate(sources)]
    extra = random_sources(9, 3)
    searches += [make_search(len(s), o, SPECIAL) for s, o in zip(extra, mates, strict=True)]
    loop.add([list(s) for s in [*sources, *extra]], searches, list(range(len(searches))))
    together: dict[int, list[Hypothesis]] = {}
    while loop.active:
        together.update({h: s.results() for h, s in loop.step()})
    for i in range(len(sources)):
        assert_same(together[i], alone[i])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sampling_topk": -1}, "sampling_topk must be >= 0"),
        ({"sampling_topk": 5, "beam_size": 4, "diversity_rate": 1.0}, "samples independently"),
        ({"sampling_topk": 5, "beam_size": 4, "diverse_beam_groups": 2}, "samples independently"),
        ({"sampling_temperature": 0.0}, r"sampling_temperature must be in \(0, 100\]"),
        ({"sampling_temperature": float("nan")}, "sampling_temperature must be in"),
        ({"seed": -3}, r"seed must be in \[0, 2\^64\)"),
        ({"sampling_topp": 0.0}, r"sampling_topp must be in \(0, 1\]"),
        ({"sampling_topp": 1.5}, r"sampling_topp must be in \(0, 1\]"),
        ({"sampling_topp": float("nan")}, r"sampling_topp must be in \(0, 1\]"),
    ],
)
def test_sampling_options_out_of_range(fields, message):
    from models.options import DecodeOptionsError

    with pytest.raises(DecodeOptionsError, match=message):
        DecodeOptions(**fields)


def test_every_search_an_option_names_has_a_strategy():
    from models.options import SEARCHES
    from service.strategies import BEAMS, strategy_for

    assert set(BEAMS) == set(SEARCHES)
    for name in SEARCHES:
        assert strategy_for(DecodeOptions(beam_size=4, search=name)) is BEAMS[name]


# -- per-token log-probs (return_token_scores) ---------------------------------------------

TOKEN_SCORE_OPTIONS = {
    "greedy": DecodeOptions(max_length=9),
    "beam": DecodeOptions(beam_size=3, n_best=3, max_length=9),
    "sampling": DecodeOptions(sampling_topk=5, seed=3, max_length=9),
    **{
        f"{search}-beam": DecodeOptions(beam_size=3, n_best=3, search=search, max_length=9)
        for search in SEARCHES
        if search not in ("standard", "joeynmt")  # Joey's feeds EOS on: tests/export
    },
    "eole-greedy-limit": DecodeOptions(search="eole", max_length=4, min_length=3),
    "prefix-ban-coverage": DecodeOptions(
        beam_size=2, n_best=2, max_length=9, ban_unk=True, coverage_penalty=0.2
    ),
}


@pytest.mark.parametrize("name", sorted(TOKEN_SCORE_OPTIONS))
def test_token_scores_add_up_and_change_nothing_else(name):
    """Every search, with each hypothesis's token log-probs kept: the same hypotheses and
    scores as without, and the log-probs add up to the hypothesis's (one a token, then
    EOS's when the search scored one: not at Eole's, Joey's or Marian's length limit)."""
    options = TOKEN_SCORE_OPTIONS[name]
    sources = random_sources(20, 40)  # 40: beyond ARRAY_MIN_SENTENCES (the plain run's arrays)
    prefixes = [(5, 6) if i % 3 == 0 and name.startswith("prefix") else () for i in range(40)]
    table = random_table(7)
    plain = run(table, sources, options, prefixes=prefixes)
    kept = run(
        table, sources, dataclasses.replace(options, return_token_scores=True), prefixes=prefixes
    )
    lengths = set()
    for src, p, k in zip(sources, plain, kept, strict=True):
        assert [(h.tokens, h.score, h.log_prob) for h in p] == [
            (h.tokens, h.score, h.log_prob) for h in k
        ]
        for h in k:
            # each the model's own value for that token after that prefix, exactly
            # (not a difference of the beam's float32 running totals), EOS's last
            steps = [*h.tokens, EOS][: len(h.token_log_probs)]
            want = [float(vector(table(src, h.tokens[:j]))[t]) for j, t in enumerate(steps)]
            assert list(h.token_log_probs) == want
            # which add up to its log-prob, up to the float32 sums of a beam's scores
            assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
            assert len(h.token_log_probs) - len(h.tokens) in (0, 1)
            lengths.add(len(h.token_log_probs) - len(h.tokens))
        assert all(h.token_log_probs is None for h in p)
    # Eole's search stops there without an EOS: no EOS entry
    assert lengths == {0} if name == "eole-greedy-limit" else 1 in lengths
