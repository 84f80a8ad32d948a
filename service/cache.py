"""A response cache (``--response-cache N``): the n-best lists of the last N sentences
decoded, per model, by source tokens and decode options.

Translation traffic repeats itself (interface strings, boilerplate, the same sentence in
many documents), and a deterministic search gives a sentence the same hypotheses whatever
else is decoded with it (the batch invariance the tests hold the loop to), so a sentence
seen before is answered from here without a decoder step, and a request of several
sentences decodes only the ones not found (Triton's response cache, per sentence).

What is not cached: sampling (its draws depend on the sentence's index in its request,
and an unseeded request must draw afresh), a stream (its prefixes are the point),
target prefixes and constraints, and ``replace_unk`` (its text depends on the source's
own spelling, not just its tokens). The cache lives in each front end; what it holds is
the engine's own answer, untouched: the same objects a decode returns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from models.options import DecodeOptions, Hypothesis
from service.jobs import Job, Timing

Key = tuple[tuple[int, ...], DecodeOptions]


class ResponseCache:
    """At most ``size`` sentences' n-best lists, the least recently used dropped first;
    thread-safe. ``counted(hit: bool, n)`` hears how many sentences were found or not."""

    def __init__(self, size: int, counted: Callable[[bool, int], None] | None = None) -> None:
        if size < 1:
            raise ValueError(f"a response cache holds at least 1 sentence, got {size}")
        self.size = size
        self._entries: OrderedDict[Key, list[Hypothesis]] = OrderedDict()
        self._lock = threading.Lock()
        self._counted = counted

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> list[Hypothesis] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Key, hypotheses: list[Hypothesis]) -> None:
        with self._lock:
            self._entries[key] = hypotheses
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def count(self, hits: int, misses: int) -> None:
        if self._counted is not None:
            if hits:
                self._counted(True, hits)
            if misses:
                self._counted(False, misses)


def cacheable(
    options: DecodeOptions,
    *,
    streamed: bool,
    prefixes: Sequence[Sequence[int]],
    constraints: Sequence[object | None],
) -> bool:
    """Whether a request's sentences may be answered from (and stored in) the cache."""
    return not (
        options.sampling
        or options.replace_unk
        or streamed
        or any(prefixes)
        or any(c is not None for c in constraints)
    )


def through_cache(
    cache: ResponseCache,
    sources: list[list[int]],
    options: DecodeOptions,
    enqueue: Callable[[list[list[int]]], Job],
) -> Job:
    """A job for ``sources`` whose sentences found in ``cache`` are answered from it, the
    others by ``enqueue(missing sources)`` (not called when every one is found); their
    answers are stored. Its future, timing and cancel are the decoding job's (none
    decoding: done at once, with zero times)."""
    keys: list[Key] = [(tuple(ids), options) for ids in sources]
    found = [cache.get(key) for key in keys]
    missing = [i for i, hyps in enumerate(found) if hyps is None]
    cache.count(len(sources) - len(missing), len(missing))
    if len(missing) == len(sources):  # nothing found: the engine's own job, stored after
        job = enqueue(sources)
        job.future.add_done_callback(lambda f: _store(cache, keys, f))
        return job
    outer = Job(sources, options, deadline=None)
    if not missing:
        now = outer.timing.submitted
        outer.timing = Timing(now, admitted=now, finished=now)
        outer.future.set_result(found)
        return outer
    inner = enqueue([sources[i] for i in missing])
    outer.timing = inner.timing  # queue, encode and decode times: the decoding part's
    outer.on_cancel = inner.cancel

    def merged(done: Future) -> None:
        if done.cancelled():
            outer.future.cancel()
            return
        error = done.exception()
        if error is not None:
            outer.future.set_exception(error)
            return
        results = list(found)
        for i, hyps in zip(missing, done.result(), strict=True):
            results[i] = hyps
            cache.put(keys[i], hyps)
        outer.future.set_result(results)

    inner.future.add_done_callback(merged)
    return outer


def _store(cache: ResponseCache, keys: list[Key], done: Future) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    for key, hyps in zip(keys, done.result(), strict=True):
        cache.put(key, hyps)
