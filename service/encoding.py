"""Encoding admitted sentences: length groups, one encoder call each, and a failing call
bisected down to the sentences that fail on their own.

The engine (:mod:`service.engine`) hands each admitted batch to this, in its encoder
thread or between two decoder steps; the outcome says which sentences encoded, in which
groups, and which could not be, so that only their requests fail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.decoding import Encoded, StepModel, length_groups, pad_batch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncodeOutcome:
    """An admitted batch back from the encoder: ``encoded`` holds ``(group, Encoded)``
    per encoded group (indices into ``admitted``); ``failed`` are the sentences that
    could not be encoded (all of them when the batch failed as a whole), ``error`` the
    first exception; ``source_tokens`` the batch's source tokens."""

    admitted: list[tuple[Any, int]]
    encoded: list[tuple[list[int], Encoded]]
    failed: tuple[int, ...] = ()
    error: BaseException | None = None
    source_tokens: int = 0


def encode_admitted(
    model: StepModel, pad: int, max_padding: int, admitted: list[tuple[Any, int]]
) -> EncodeOutcome:
    """Encode sentence ``i`` of each ``(job, i)`` of ``admitted`` (its token ids:
    ``job.sources[i]``) in length groups that waste at most ``max_padding`` tokens on
    padding (:func:`service.decoding.length_groups`). Never raises: a failure is part of
    the outcome, and a group whose encoder call raises is bisected so that only the
    sentences that fail on their own fail."""
    try:
        sources = [job.sources[i] for job, i in admitted]
        encoded: list[tuple[list[int], Encoded]] = []
        failed: list[int] = []
        error = None
        for group in length_groups([len(s) for s in sources], max_padding):
            exc = _encode_group(model, pad, sources, group, encoded, failed)
            if error is None:
                error = exc
        if error is not None:
            log.error(
                "encoder failure: %d of %d sentences fail to encode on their own; "
                "failing their requests",
                len(failed),
                len(admitted),
                exc_info=error,
            )
            # Logged. Its traceback would keep the groups' outputs alive as long as the
            # failed requests' errors live (fixed encoder buffers are written again only
            # once nothing refers to them: service/encodergraphs.py).
            error = error.with_traceback(None)
        tokens = sum(map(len, sources))
        return EncodeOutcome(admitted, encoded, tuple(failed), error, tokens)
    except Exception as exc:  # noqa: BLE001 - the scheduler fails these requests
        log.exception("encoder failure; failing the requests being admitted")
        return EncodeOutcome(admitted, [], tuple(range(len(admitted))), exc)


def _encode_group(
    model: StepModel,
    pad: int,
    sources: Sequence[Sequence[int]],
    group: list[int],
    encoded: list[tuple[list[int], Encoded]],
    failed: list[int],
) -> Exception | None:
    """Encode sentences ``group`` (indices into ``sources``) in one call; when it raises,
    encode each half on its own, and so on down to the sentences that fail alone
    (appended to ``failed``; at most ``2 len(group) - 1`` calls). Encoded parts go to
    ``encoded``. Returns the first exception, if any."""
    first = None
    todo = [group]
    while todo:
        part = todo.pop()
        try:
            ids, lengths = pad_batch([list(sources[i]) for i in part], pad)
            encoded.append((part, model.encode(ids, lengths)))
        except Exception as exc:  # noqa: BLE001 - bisected below
            if first is None:
                first = exc
            if len(part) == 1:
                failed.append(part[0])
            else:
                half = len(part) // 2
                todo += [part[half:], part[:half]]
    return first
