"""A decoder step or an encoder batch that fails for one request's rows fails that
request only: the others finish with exactly the translations they get alone."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from models.options import DecodeOptions
from service import strategies
from service.decoding import SentenceSearch
from service.engine import Engine, EngineConfig, EngineFailure
from service.greedyrows import GreedyRows
from service.loop import isolate_failures
from service.strategies import strategy_for
from tests.service.server_helpers import wait_until

TIMEOUT = 60.0
GREEDY = DecodeOptions()
# greedy that keeps attention: decoded per sentence, not in the loop's greedy arrays
GREEDY_ATTENTION = DecodeOptions(return_attention=True)
BEAM = DecodeOptions(beam_size=3, n_best=2)
# greedy long enough that every sentence takes several calls of four steps (--greedy-steps)
LONG_GREEDY = DecodeOptions(min_length=10, max_length=24)
# What the client of a failed request reads (the servicer sends it with INTERNAL).
INTERNAL = r"^internal error \(RuntimeError\) .*; the server logged the details$"
DECODING = r"^internal error \(RuntimeError\) decoding this request;"
ENCODING = r"^internal error \(RuntimeError\) encoding this request;"


class FaultyModel:
    """The bundle's ONNX model with faults switched on by the test.

    * ``step_poison``: a decoder step raises when it holds rows of a source with this
      many tokens past their first step (so the poisoned request has taken one step
      together with the others before it fails);
    * ``encode_poison``: an encoder call raises when it holds a source of that length;
    * ``broken`` / ``encoder_broken``: every decoder step / encoder call raises;
    * :meth:`hold_encoder` / :meth:`hold_steps`: the next encoder call / every decoder
      step waits until :meth:`release` (:meth:`step_once` lets one held step through).
    """

    def __init__(self, model, special) -> None:
        self.model, self.bos = model, special.bos
        self.step_poison: int | None = None
        self.encode_poison: int | None = None
        self.broken = self.encoder_broken = False
        self.entered = threading.Event()
        self._encoder_gate: threading.Event | None = None
        self._step_gate: threading.Event | None = None
        self._gates: list[threading.Event] = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def hold_encoder(self) -> None:
        self.entered.clear()
        self._encoder_gate = threading.Event()
        self._gates.append(self._encoder_gate)

    def hold_steps(self) -> None:
        self.entered.clear()
        self._step_gate = threading.Event()
        self._gates.append(self._step_gate)

    def step_once(self) -> None:
        """Let the held decoder step through and hold the next one."""
        gate = self._step_gate
        assert gate is not None, "no step is held"
        self.hold_steps()
        gate.set()

    def release(self) -> None:
        self._encoder_gate = self._step_gate = None
        for gate in self._gates:
            gate.set()

    def _wait(self, gate: threading.Event | None) -> None:
        if gate is not None:
            self.entered.set()
            assert gate.wait(TIMEOUT), "the test never released the model"

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray):
        gate, self._encoder_gate = self._encoder_gate, None
        self._wait(gate)
        if self.encoder_broken:
            raise RuntimeError("injected broken encoder")
        if self.encode_poison is not None and self.encode_poison in src_lengths.tolist():
            raise RuntimeError("injected encoder failure")
        return self.model.encode(src_ids, src_lengths)

    def step(self, **feeds):
        self._wait(self._step_gate)
        if self.broken:
            raise RuntimeError("injected broken session")
        if self.step_poison is not None:
            lengths = feeds["mask"][feeds["row_sentence"]].sum(axis=1)
            poisoned = (lengths == self.step_poison) & (feeds["prev_tokens"] != self.bos)
            if poisoned.any():
                raise RuntimeError("injected decoder failure")
        return self.model.step(**feeds)


def load_tiny_bundle(tiny_bundle, greedy_steps: int = 1):
    """One decoder step a call unless ``greedy_steps`` (the tests of calls of several
    greedy steps, whose choice is made in the graph, are at the end)."""
    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1, greedy_steps=greedy_steps)
    return load_bundle(tiny_bundle.bundle_dir, runtime)


def engine_factory(bundle) -> Iterator:
    """Yields ``make(**config)`` -> ``(engine, model)``: a started engine over a
    :class:`FaultyModel` (no fault switched on); stops them all when resumed."""
    from prometheus_client import CollectorRegistry

    from service.metrics import create_metrics

    made: list[tuple[Engine, FaultyModel]] = []

    def make(**config) -> tuple[Engine, FaultyModel]:
        model = FaultyModel(bundle.model, bundle.special)
        engine = Engine(
            dataclasses.replace(bundle, model=model),
            EngineConfig(**config),
            create_metrics(CollectorRegistry()),
        )
        engine.start()
        made.append((engine, model))
        return engine, model

    yield make
    for engine, model in made:
        model.release()
        engine.stop(TIMEOUT)


@pytest.fixture(scope="module")
def bundle(tiny_bundle):
    return load_tiny_bundle(tiny_bundle)


@pytest.fixture
def make_engine(bundle):
    yield from engine_factory(bundle)


def nbest(hyps_per_sentence) -> list:
    return [[(h.tokens, h.score, h.log_prob) for h in hyps] for hyps in hyps_per_sentence]


def innocent_texts(tiny_bundle) -> list[str]:
    return list(tiny_bundle.sentences[1:8])


def poison_text(tiny_bundle, bundle) -> tuple[str, int]:
    """A sentence whose token count no innocent sentence has, and that count."""
    taken = {len(bundle.src_tokenizer.encode(t)) for t in innocent_texts(tiny_bundle)}
    for text in tiny_bundle.sentences[8:]:
        n = len(bundle.src_tokenizer.encode(text))
        if n not in taken:
            return text, n
    raise AssertionError("no sentence of a length of its own")


def reference(make_engine, texts: list[str], options: DecodeOptions) -> list:
    """Each text's n-best list from an engine with no fault, all sent at once."""
    engine, _ = make_engine()
    jobs = [engine.submit([t], options, timeout=TIMEOUT) for t in texts]
    return [nbest(job.future.result(TIMEOUT)) for job in jobs]


def submit_together(engine, model, texts: list[str], options: DecodeOptions) -> list:
    """Submit one request per text so that all but the first are admitted (and
    encoded) together while the first is decoding: the first one's encoder call is held
    until the others are queued."""
    model.hold_encoder()
    jobs = [engine.submit([texts[0]], options, timeout=TIMEOUT)]
    assert model.entered.wait(TIMEOUT), "the first request was never encoded"
    jobs += [engine.submit([t], options, timeout=TIMEOUT) for t in texts[1:]]
    model.release()
    return jobs


def check_isolated(engine, jobs, poisoned: int, want: list) -> None:
    innocents = [job for i, job in enumerate(jobs) if i != poisoned]
    with pytest.raises(EngineFailure, match=INTERNAL):
        jobs[poisoned].future.result(TIMEOUT)
    assert [nbest(job.future.result(TIMEOUT)) for job in innocents] == want
    assert wait_until(lambda: not engine._loop.active and engine._rows_reserved == 0, TIMEOUT)


ENGINE_LOGGERS = ("service.engine", "service.encoding")


def engine_errors(caplog) -> list[logging.LogRecord]:
    """The error records of the engine and of its encoding (service/encoding.py)."""
    return [r for r in caplog.records if r.name in ENGINE_LOGGERS and r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("engines", "options"),
    [("make_engine", GREEDY), ("make_engine", BEAM), ("make_steps_engine", LONG_GREEDY)],
    ids=["greedy", "beam", "greedy-steps"],
)
def test_poisoned_decoder_step_fails_only_its_request(
    request, engines, tiny_bundle, bundle, options, caplog
):
    """A step (with --greedy-steps, a call of several steps) that fails for one
    sentence's rows past its first step: probing halves of the rows finds it."""
    make_engine = request.getfixturevalue(engines)
    texts = innocent_texts(tiny_bundle)
    want = reference(make_engine, texts, options)
    poison, length = poison_text(tiny_bundle, bundle)
    engine, model = make_engine()
    model.step_poison = length
    caplog.set_level(logging.ERROR, logger="service.engine")
    jobs = submit_together(engine, model, [*texts[:4], poison, *texts[4:]], options)
    check_isolated(engine, jobs, 4, want)
    # One incident, logged once with its exception (not once per bisection probe).
    [record] = engine_errors(caplog)
    assert record.exc_info and "injected decoder failure" in str(record.exc_info[1])
    # The engine keeps serving, the poison included once the fault is gone.
    model.step_poison = None
    again = engine.submit([poison, *texts[:2]], options, timeout=TIMEOUT)
    assert nbest(again.future.result(TIMEOUT))[1:] == [w[0] for w in want[:2]]


def fail_finish(monkeypatch, length: int) -> None:
    """A search of a source of ``length`` tokens raises as it ends (a plain greedy
    sentence of the loop's arrays records its search only then)."""
    real_finish = SentenceSearch.finish

    def finish(self, *args):
        if self.src_len == length:
            raise RuntimeError("injected search failure")
        return real_finish(self, *args)

    monkeypatch.setattr(SentenceSearch, "finish", finish)


@pytest.mark.parametrize("where", ["select", "take"])
@pytest.mark.parametrize(
    "options",
    [GREEDY, GREEDY_ATTENTION, BEAM],
    ids=["greedy-rows", "greedy-per-sentence", "beam"],
)
def test_failing_search_fails_only_its_request(
    make_engine, tiny_bundle, bundle, options, where, monkeypatch
):
    """A sentence's search raising fails only its request: choosing its step (its
    strategy's ``select``, batched over the strategy's sentences: the step changes
    nothing and the engine isolates the sentence by probing) or recording it
    (``take``: the other sentences' step is applied exactly once). Plain greedy
    sentences live in the loop's greedy arrays: their step is chosen by
    ``GreedyRows.select`` and a search records only its last one (``finish``)."""
    texts = innocent_texts(tiny_bundle)
    want = reference(make_engine, texts, options)
    poison, length = poison_text(tiny_bundle, bundle)
    engine, model = make_engine()

    def poisoned(search) -> bool:
        return search.src_len == length and search.step == 1

    if options is GREEDY:  # the greedy arrays from the first sentence (else from 16)
        monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 1)
    if options is GREEDY and where == "take":
        fail_finish(monkeypatch, length)
    elif options is GREEDY:
        real_rows_select = GreedyRows.select

        def rows_select(self, rows, values, ids):
            for j in range(len(self)) if rows is None else rows.tolist():
                if self.entries[j].search.src_len == length and self.step[j] == 1:
                    raise RuntimeError("injected search failure")
            return real_rows_select(self, rows, values, ids)

        monkeypatch.setattr(GreedyRows, "select", rows_select)
    elif where == "take":
        real_take = SentenceSearch.take

        def take(self, *args):
            if poisoned(self):
                raise RuntimeError("injected search failure")
            return real_take(self, *args)

        monkeypatch.setattr(SentenceSearch, "take", take)
    else:
        cls = type(strategy_for(options))
        real_select = cls.select

        def select(self, searches, *args):
            if any(poisoned(s) for s in searches):
                raise RuntimeError("injected search failure")
            return real_select(self, searches, *args)

        monkeypatch.setattr(cls, "select", select)
    jobs = submit_together(engine, model, [*texts[:2], poison, *texts[2:]], options)
    check_isolated(engine, jobs, 2, want)


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_poisoned_encoder_batch_fails_only_its_request(
    make_engine, tiny_bundle, bundle, background, caplog
):
    texts = innocent_texts(tiny_bundle)
    want = reference(make_engine, texts, BEAM)
    poison, length = poison_text(tiny_bundle, bundle)
    # One length group: the poison shares its encoder call with the innocent sentences.
    engine, model = make_engine(background_encoder=background, encode_max_padding=10_000)
    model.encode_poison = length
    caplog.set_level(logging.ERROR, logger="service.encoding")
    jobs = submit_together(engine, model, [*texts[:5], poison, *texts[5:]], BEAM)
    check_isolated(engine, jobs, 5, want)
    [record] = engine_errors(caplog)
    assert "injected encoder failure" in str(record.exc_info[1])


def test_poisoned_sentence_fails_its_whole_request(make_engine, tiny_bundle, bundle):
    """A request's other sentences stop too, encoded or still queued."""
    texts = innocent_texts(tiny_bundle)
    poison, length = poison_text(tiny_bundle, bundle)
    engine, model = make_engine(encode_batch_sentences=2)
    model.step_poison = length
    job = engine.submit([texts[0], poison, *texts[1:]], GREEDY, timeout=TIMEOUT)
    with pytest.raises(EngineFailure, match=DECODING):
        job.future.result(TIMEOUT)
    assert wait_until(lambda: not engine._loop.active and engine._rows_reserved == 0, TIMEOUT)
    assert not engine._queue


def test_step_failing_for_every_row_fails_all_then_serving_resumes(
    make_engine, tiny_bundle, bundle
):
    texts = innocent_texts(tiny_bundle)
    want = reference(make_engine, texts, GREEDY)
    engine, model = make_engine()
    model.broken = True
    jobs = submit_together(engine, model, [*texts, texts[0]], GREEDY)
    for job in jobs:
        with pytest.raises(EngineFailure, match=DECODING):
            job.future.result(TIMEOUT)
    assert wait_until(lambda: not engine._loop.active and engine._rows_reserved == 0, TIMEOUT)
    model.broken = False
    jobs = [engine.submit([t], GREEDY, timeout=TIMEOUT) for t in texts]
    assert [nbest(job.future.result(TIMEOUT)) for job in jobs] == want


def test_encoder_failing_for_every_sentence_fails_all_then_serving_resumes(
    make_engine, tiny_bundle
):
    texts = innocent_texts(tiny_bundle)
    engine, model = make_engine()
    model.encoder_broken = True
    jobs = submit_together(engine, model, texts, GREEDY)
    for job in jobs:
        with pytest.raises(EngineFailure, match=ENCODING):
            job.future.result(TIMEOUT)
    model.encoder_broken = False
    job = engine.submit(texts, GREEDY, timeout=TIMEOUT)
    assert len(job.future.result(TIMEOUT)) == len(texts)
    assert wait_until(lambda: not engine._loop.active and engine._rows_reserved == 0, TIMEOUT)


# -- the bisection itself ---------------------------------------------------------------


def prober(bad: set, *, together: set = frozenset()):
    """``fails`` for isolate_failures: a subset fails when it holds a ``bad`` item or
    all of ``together``; ``calls`` counts the probes."""
    calls = []

    def fails(items: list) -> bool:
        calls.append(list(items))
        return bool(bad & set(items)) or bool(together) and together <= set(items)

    return fails, calls


@pytest.mark.parametrize("bad", [{0}, {37}, {63}, {5, 40}, {1, 2, 3}])
def test_bisection_finds_the_bad_items(bad):
    fails, calls = prober(bad)
    assert sorted(isolate_failures(range(64), fails)) == sorted(bad)
    assert len(calls) <= 2 * len(bad) * 6


def test_bisection_is_bounded_when_everything_fails():
    fails, calls = prober(set(range(256)))
    assert sorted(isolate_failures(range(256), fails)) == list(range(256))
    assert len(calls) <= 8 * (8 + 1)
    fails, calls = prober(set(range(8)))
    assert sorted(isolate_failures(range(8), fails)) == list(range(8))
    assert len(calls) == 14  # room enough to try each one alone


def test_bisection_of_inseparable_and_transient_failures():
    fails, _ = prober(set(), together={2, 5})
    assert sorted(isolate_failures(range(8), fails)) == list(range(8))
    assert sorted(isolate_failures(range(8), fails, confirm=False)) == list(range(8))
    fails, calls = prober(set())  # the step's failure does not repeat
    assert isolate_failures(range(8), fails) == []
    assert len(calls) == 3
    assert isolate_failures([7], fails) == [7]  # the failed step was its probe


# -- several greedy steps a call (--greedy-steps) -------------------------------------------


@pytest.fixture(scope="module")
def steps_bundle(tiny_bundle):
    bundle = load_tiny_bundle(tiny_bundle, greedy_steps=4)
    assert bundle.model.greedy_steps == 4
    return bundle


@pytest.fixture
def make_steps_engine(steps_bundle):
    yield from engine_factory(steps_bundle)


def test_a_search_failing_as_it_ends_mid_call_fails_only_its_request(
    make_steps_engine, tiny_bundle, bundle, monkeypatch
):
    """A sentence whose search raises as it ends (its EOS inside a call of several
    steps) fails alone; the others take all the call's steps exactly once."""
    texts = innocent_texts(tiny_bundle)
    want = reference(make_steps_engine, texts, LONG_GREEDY)
    poison, length = poison_text(tiny_bundle, bundle)
    engine, model = make_steps_engine()
    fail_finish(monkeypatch, length)
    jobs = submit_together(engine, model, [*texts[:2], poison, *texts[2:]], LONG_GREEDY)
    check_isolated(engine, jobs, 2, want)
