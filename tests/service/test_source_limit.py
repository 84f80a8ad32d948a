"""The server refuses sources longer than the export's parity gate verified
(``max_source_tokens`` in the manifest), even when its own limit is higher."""

from __future__ import annotations

import json
import shutil

import grpc
import pytest

from export import spec
from models.tokenizer import Tokenizer
from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.service.server_fixtures import TINY_MODEL, ServerFactory
from tests.service.server_helpers import TIMEOUT, proto_options, rpc_error, stub_for

VERIFIED = 5


@pytest.fixture(scope="module")
def short_repo(tmp_path_factory, tiny_bundle):
    """The tiny bundle, its manifest saying the gate verified only ``VERIFIED`` tokens
    (manifest.json is not in its own sha256 list)."""
    repo = tmp_path_factory.mktemp("short-repo")
    bundle_dir = repo / TINY_MODEL / "1"
    shutil.copytree(tiny_bundle.bundle_dir, bundle_dir)
    path = bundle_dir / spec.MANIFEST_FILE
    manifest = json.loads(path.read_text())
    assert manifest["max_source_tokens"] == 1024  # as exported by the tiny_bundle fixture
    manifest["max_source_tokens"] = VERIFIED
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return repo


@pytest.fixture(scope="module")
def sentences(short_repo, tiny_bundle) -> dict[int, str]:
    """A sentence of exactly n source tokens for n in (VERIFIED, VERIFIED + 1)."""
    tok = Tokenizer.from_file(short_repo / TINY_MODEL / "1" / spec.SRC_SPM_FILE)
    found: dict[int, str] = {}
    for line in tiny_bundle.sentences:
        words = line.split()
        for end in range(1, len(words) + 1):
            text = " ".join(words[:end])
            found.setdefault(len(tok.encode(text)), text)
    assert VERIFIED in found and VERIFIED + 1 in found, sorted(found)
    return found


@pytest.fixture(scope="module")
def stub(short_repo):
    factory = ServerFactory(short_repo)
    # The engine's own limit (128) is above the verified one. Warm-up's sentence is longer
    # than 5 tokens here: warm-up cuts it instead of failing the start.
    server = factory(max_source_tokens=128)
    channel, stub = stub_for(server.port)
    yield stub
    channel.close()
    factory.close()


def test_a_source_over_the_verified_length_is_refused(stub, sentences):
    text = sentences[VERIFIED + 1]
    request = pb.TranslateRequest(texts=["Hi.", text], options=proto_options())
    error = rpc_error(lambda: stub.Translate(request, timeout=TIMEOUT))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        f"texts[1] has {VERIFIED + 1} source tokens; the model was verified up to "
        f"{VERIFIED} source tokens: split the sentence"
    )


def test_a_source_at_the_verified_length_is_translated(stub, sentences):
    request = pb.TranslateRequest(texts=[sentences[VERIFIED]], options=proto_options())
    response = stub.Translate(request, timeout=TIMEOUT)
    (translation,) = response.translations
    assert len(translation.hypotheses) == 1
    assert translation.source_tokens == VERIFIED
