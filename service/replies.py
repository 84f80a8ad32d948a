"""Replies: a sentence's message, every reply checked against the message limit before
it is sent, and large ones built on reply threads so that the event loop (health checks,
other calls) never waits for detokenising, attention maps or serialization."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from google.protobuf.message import Message

from models.options import Hypothesis
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.diagnostics import diagnose, observe
from service.errors import InvalidRequest
from service.front import EngineFront
from service.jobs import TranslationResult
from service.messages import to_translation
from service.metrics import Metrics

# Threads that render and serialize replies, off the event loop.
REPLY_THREADS = 2
# A reply of at most this many hypotheses and no attention is built on the event loop
# itself: detokenising and serializing it costs less than the hop to a reply thread and
# back (an executor submit and a wake-up of the loop).
INLINE_REPLY_HYPOTHESES = 4


class Replies:
    """Builds the servicer's replies (one per servicer; its threads live as long as it)."""

    def __init__(self, metrics: Metrics, default_model: str, max_message_bytes: int) -> None:
        self.metrics = metrics
        self.default_model = default_model
        self.max_message_bytes = max_message_bytes
        self.pool = ThreadPoolExecutor(REPLY_THREADS, thread_name_prefix="nmt-reply")

    def check_size(self, size: int) -> None:
        if size > self.max_message_bytes:
            raise InvalidRequest(
                f"the reply would be {size} bytes, over the {self.max_message_bytes}"
                "-byte limit (--max-message-bytes; gRPC clients accept 4 MiB by default): "
                "send fewer sentences, ask for fewer n-best or no attention, or raise the "
                "limit on the server and the client"
            )

    def serialize(self, reply: Message) -> bytes:
        data = reply.SerializeToString()
        self.check_size(len(data))
        return data

    def build(
        self, make: Callable[[], Message], nbest: list[list[Hypothesis]], attention: bool
    ) -> bytes:
        """``make()`` serialized; refused before it is built when the attention maps it
        will carry (``attention``), 4 bytes a value, alone exceed the limit: a reply of 67
        MB costs a second to build."""
        if attention:
            self.check_size(
                sum(4 * h.attention.size for hyps in nbest for h in hyps if h.attention is not None)
            )
        return self.serialize(make())

    def translation(
        self,
        engine: EngineFront,
        model: str,
        result: TranslationResult,
        options: pb.DecodeOptions,
        *,
        finish_reasons: bool = True,
    ) -> pb.Translation:
        """One sentence's message. With diagnostics asked for, each hypothesis carries its
        own, and the best one's go to the model's histograms (so those sample the requests
        that ask). Runs on a reply thread. ``finish_reasons``: why each hypothesis ended
        (not for Score, whose targets are given)."""
        diagnostics = None
        if options.return_diagnostics:
            unk = engine.bundle.source_unk_id  # source ids: not the config's (target's)
            diagnostics = [
                diagnose(h.attention, result.source_ids, unk) for _, _, h in result.hypotheses
            ]
            if diagnostics:
                observe(self.metrics, model or self.default_model, diagnostics[0])
        return to_translation(
            result,
            scores=options.return_scores,
            attention=options.return_attention,
            diagnostics=diagnostics,
            alignment=options.return_alignment,
            finish_reasons=finish_reasons,
        )

    async def off_loop(
        self, fn: Callable[[], bytes], nbest: list[list[Hypothesis]], attention: bool
    ) -> bytes:
        """``fn()`` (which renders and serializes ``nbest``) on a reply thread: a large reply
        must not hold up the event loop (health checks, other calls). A small one is built
        right here (:data:`INLINE_REPLY_HYPOTHESES`)."""
        if not attention and sum(map(len, nbest)) <= INLINE_REPLY_HYPOTHESES:
            return fn()
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn)
