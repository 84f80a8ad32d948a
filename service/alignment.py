"""Reading a hypothesis's attention as a hard alignment: for each target token, the
source token its step attended to most (fairseq's ``--print-alignment hard``), and
unknown-word replacement by that token (Eole's and OpenNMT-py's ``-replace_unk``,
CTranslate2's ``replace_unknowns``). Only the source's own tokens count: never the
tokenizer's start and end markers, nor padding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.options import Hypothesis


def source_span(
    source: Sequence[str], marks: tuple[int, int] = (0, 0), pad: str | None = None
) -> tuple[int, int]:
    """``(first, end)``: the positions of ``source`` (one sentence's tokens as the encoder
    read them) that the request's text wrote: not the tokenizer's ``marks`` (how many of
    the first and last tokens are its start and end markers, ``<sos>``, ``EOS``: see
    :attr:`service.bundle.Bundle.source_marks`), nor the ``pad`` tokens after its end
    markers (:attr:`service.bundle.Bundle.source_pad`). ``first >= end``: none."""
    end = len(source)
    while pad is not None and end > 0 and source[end - 1] == pad:
        end -= 1
    return marks[0], end - marks[1]


def hard_alignment(attention: np.ndarray, span: tuple[int, int], steps: int) -> list[int]:
    """For each of the first ``steps`` rows of ``attention`` ``(target steps, src_len)``, the
    source position in ``span`` (:func:`source_span`) it weighs most, counted from the
    span's start: the argmax, the first on a tie, as fairseq's ``extract_hard_alignment``
    (which leaves out the source's EOS the same way). ``[]`` for an empty span."""
    first, end = span
    if first >= end:
        return []
    return attention[:steps, first:end].argmax(axis=1).tolist()


def replace_unknowns(
    pieces: list[str],
    hyp: Hypothesis,
    source: Sequence[str],
    unk_id: int,
    marks: tuple[int, int] = (0, 0),
    pad: str | None = None,
) -> list[str]:
    """``pieces`` (of ``hyp.tokens``) with each unknown token replaced by the ``source``
    token (as written) with the most attention at its step (:func:`hard_alignment`);
    ``hyp.attention`` ``(len(tokens) + 1, src_len)``. The tokenizer's start and end
    markers (``marks``) and the padding after them (``pad``) are never copied, whatever
    their attention (:func:`source_span`), but the real word with the most attention at
    that step is; a source with no real word leaves the unknown token as it is."""
    if hyp.attention is None:
        raise ValueError("replace_unk needs the hypothesis's attention")
    span = source_span(source, marks, pad)
    out = list(pieces)
    aligned = hard_alignment(hyp.attention, span, len(hyp.tokens))
    for step, source_index in enumerate(aligned):
        if hyp.tokens[step] == unk_id:
            out[step] = source[span[0] + source_index]
    return out
