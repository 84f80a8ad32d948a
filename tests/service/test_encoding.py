"""service/encoding.py: admitted sentences encoded in length groups; a failing encoder
call is bisected down to the sentences that fail on their own, and nothing raises."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from service.decoding import Encoded
from service.encoding import encode_admitted

PAD = 0


class CountingEncoder:
    """Encodes anything but a sentence holding ``poison``; counts its calls."""

    def __init__(self, poison: int | None = None) -> None:
        self.poison = poison
        self.calls: list[int] = []  # batch size of each call

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        self.calls.append(len(src_ids))
        if self.poison is not None and (src_ids == self.poison).any():
            raise RuntimeError("injected encoder failure")
        n, width = src_ids.shape
        return Encoded(
            memory=np.zeros((n, width, 2), np.float32),
            keys=np.zeros((n, width, 2), np.float32),
            mask=src_ids != PAD,
            states=(src_ids.sum(axis=1, keepdims=True).astype(np.float32),),
        )


def admitted_of(sources: list[list[int]]) -> list[tuple[SimpleNamespace, int]]:
    job = SimpleNamespace(sources=sources)
    return [(job, i) for i in range(len(sources))]


def test_every_sentence_encodes_once_in_length_groups():
    sources = [[5] * n for n in (3, 9, 4, 9, 2, 8)]
    model = CountingEncoder()
    out = encode_admitted(model, PAD, 2, admitted_of(sources))
    assert out.failed == () and out.error is None
    assert out.source_tokens == sum(map(len, sources))
    seen = sorted(i for group, _ in out.encoded for i in group)
    assert seen == list(range(len(sources)))
    for group, enc in out.encoded:
        # each group's rows are its sentences, in its order, padding at most 2 tokens
        lengths = [len(sources[i]) for i in group]
        assert enc.mask.sum(axis=1).tolist() == lengths
        assert len(group) * max(lengths) - sum(lengths) <= 2
    assert len(model.calls) == len(out.encoded)


@pytest.mark.parametrize("bad", [[0], [5], [2, 6], list(range(8))], ids=str)
def test_a_failing_call_is_bisected_to_the_sentences_that_fail_alone(bad):
    sources = [[7, 7, 7] for _ in range(8)]  # one length: one group of 8
    for i in bad:
        sources[i] = [7, 9, 7]
    model = CountingEncoder(poison=9)
    out = encode_admitted(model, PAD, 100, admitted_of(sources))
    assert sorted(out.failed) == bad
    assert str(out.error) == "injected encoder failure"
    assert sorted(i for group, _ in out.encoded for i in group) == [
        i for i in range(8) if i not in bad
    ]
    assert len(model.calls) <= 2 * len(sources) - 1


def test_nothing_raises_even_for_admitted_sentences_it_cannot_read():
    job = SimpleNamespace(sources=[[4, 4]])
    out = encode_admitted(CountingEncoder(), PAD, 4, [(job, 0), (job, 3)])  # no sentence 3
    assert out.failed == (0, 1) and out.encoded == []
    assert isinstance(out.error, IndexError)


def test_the_error_it_returns_holds_no_encoded_output():
    """Once logged, the error leaves its traceback behind: its frames held the groups'
    outputs, which fixed encoder buffers need back (service/encodergraphs.py) while the
    failed requests' errors may live on."""
    import weakref

    sources = [[7, 7, 7], [7, 9, 7], [7, 7, 7, 7]]
    # (pytest's log capture would keep the record, and the traceback with it; a stream
    # handler formats it and lets it go)
    logger = logging.getLogger("service.encoding")
    logger.disabled = True
    try:
        out = encode_admitted(CountingEncoder(poison=9), PAD, 0, admitted_of(sources))
    finally:
        logger.disabled = False
    assert out.failed == (1,) and out.error.__traceback__ is None
    outputs = [weakref.ref(enc.memory) for _, enc in out.encoded]
    error = out.error
    del out
    assert outputs and all(ref() is None for ref in outputs)
    assert str(error) == "injected encoder failure"
