"""export.modules: the Signature's checks, the source mask an unmasked decoder gets, and
encoders without lengths encoded per length (eagerly and by ONNX Runtime)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from export.modules import AdaptedModel, AdapterError, Signature, SourceMask
from export.spec import BundleConfig


def test_signature_refuses_what_it_cannot_call():
    with pytest.raises(AdapterError, match=r"decoder_returns names \['scores'\] unknown"):
        Signature(decoder_returns=("scores", "hidden", "attention"))
    with pytest.raises(AdapterError, match="exactly one of 'logits', 'log_probs'"):
        Signature(decoder_returns=("logits", "log_probs", "hidden", "attention"))
    with pytest.raises(AdapterError, match="must include 'feed'"):
        Signature(extra_state={"feed": 8})
    with pytest.raises(AdapterError, match="rnn must be one of"):
        Signature(rnn="rnn_tanh")
    with pytest.raises(AdapterError, match="encoder_args must include 'src'"):
        Signature(encoder_args=("lengths",))
    sig = Signature(
        rnn="lstm",
        extra_state={"feed": 8},
        decoder_args=("token", "hidden", "memory", "feed"),
        decoder_returns=("logits", "hidden", "attention", "feed"),
    )
    assert sig.state_names == ("hidden", "cell", "feed")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"encoder_args": ("src", ("lengths",))},
         r"encoder_args holds \[\('lengths',\)\]: give names$"),
        ({"decoder_args": ("token", ("memory", ("hidden",)))}, "give names, or a tuple of names"),
        ({"decoder_args": ("token", ["memory", "hidden"])}, "or a tuple of names for a list"),
        ({"decoder_args": ("token", ("memory", "hidden", "lens"))}, r"names \['lens'\] unknown"),
        ({"decoder_args": ("token", "memory", ("memory", "hidden"))},
         r"\['memory'\] more than once"),
        ({"decoder_returns": ("logits", ("_", "hidden"))}, "must include 'attention'"),
        ({"decoder_returns": ("logits", "hidden", "attention"), "attention_from": "weights"},
         "names 'attention' and attention_from is set: give one"),
        ({"decoder_returns": ("logits", "hidden"), "attention_from": "attention weights"},
         "attention_from must name a decoder attribute"),
        ({"time_major": ("memory", "keys")}, "time_major must be True, False or a tuple of"),
        ({"time_major": "memory"}, "time_major must be True, False or a tuple of"),
        ({"source_width": 9}, "source_width and source_pad go together"),
        ({"source_pad": 1}, "source_width and source_pad go together"),
        ({"source_width": -1, "source_pad": 1}, "source_width must be a number of tokens"),
        ({"source_width": 9, "source_pad": -2}, "source_pad must be a source token id"),
    ],
)  # fmt: skip
def test_signature_refuses_bad_lists_layouts_and_source_widths(fields, message):
    with pytest.raises(AdapterError, match=message):
        Signature(**fields)


def test_signature_of_a_d2l_decoder():
    """d2l's ``decoder(X, [memory, hidden, valid_lens])`` returning ``(Y, [memory,
    hidden, valid_lens])``, its attention kept in ``attention_weights``."""
    sig = Signature(
        time_major=("memory",),
        decoder_args=("token", ("memory", "hidden", "lengths")),
        decoder_returns=("logits", ("_", "hidden", "_")),
        attention_from="attention_weights",
        source_width=9,
        source_pad=4,
    )
    assert sig.sequence_first == {"memory"} and not sig.masks_softmax
    assert Signature(time_major=True).sequence_first == {"src", "memory", "step_memory"}
    assert Signature().sequence_first == frozenset() and Signature().masks_softmax
    assert Signature(decoder_args=("token", "hidden", "memory", "lengths")).masks_softmax is False


@pytest.mark.parametrize(
    ("shape", "dim"),
    [((3, 5), -1), ((3, 1, 5), -1), ((3, 5, 1), 1), ((5, 3), 0)],
    ids=["rows-src", "rows-1-src", "rows-src-1", "src-rows"],
)
def test_source_mask_puts_zero_weight_on_padding(shape, dim):
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    scores = torch.randn(shape)
    with SourceMask(mask) as masking:
        weights = F.softmax(scores, dim=dim)
    assert masking.hits == 1
    w = weights.reshape(3, 5) if shape[0] == 3 else weights.t()
    assert torch.all(w[~mask] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(3))


def test_source_mask_leaves_other_softmaxes_alone():
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    x = torch.randn(3, 7)
    with SourceMask(mask) as masking:
        y = torch.softmax(x, -1)
    assert masking.hits == 0 and torch.equal(y, torch.softmax(x, -1))


class _Encoder(nn.Module):
    """Takes no lengths: a bidirectional GRU reads padding as input."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.rnn = nn.GRU(6, 4, batch_first=True, bidirectional=True)

    def forward(self, src):
        out, h = self.rnn(self.emb(src))
        return out, h


class _Decoder(nn.Module):
    """Dot attention with a softmax the adapter masks."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.out = nn.Linear(16, 20)

    def forward(self, token, hidden, memory):
        out, hidden = self.rnn(self.emb(token), hidden)
        weights = torch.softmax(torch.bmm(out, memory.transpose(1, 2)), dim=-1)
        context = torch.bmm(weights, memory)
        return self.out(torch.cat([out, context], -1)).squeeze(1), hidden, weights.squeeze(1)


def _bridge(h):
    return torch.cat([h[0:1], h[1:2]], dim=-1)  # two directions -> one 8-wide layer


def _adapted() -> AdaptedModel:
    torch.manual_seed(0)
    config = BundleConfig(20, 20, 0, 1, 2, 3, ("hidden",), exact_lengths=True)
    sig = Signature(bridge=_bridge)
    return AdaptedModel(_Encoder(), _Decoder(), config=config, signature=sig).eval()


def test_encoder_without_lengths_encodes_each_sentence_as_if_alone(tmp_path):
    from export.graphs import export_graphs
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    model = _adapted()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0], [11, 12, 13, 0]])
    lengths = torch.tensor([4, 2, 3])
    with torch.no_grad():
        batch = model.encode(src, lengths)
        alone = [
            model.encode(src[i : i + 1, : int(n)], lengths[i : i + 1])
            for i, n in enumerate(lengths)
        ]
    for i, enc in enumerate(alone):
        n = int(lengths[i])
        assert torch.equal(batch.memory[i, :n], enc.memory[0])
        assert torch.equal(batch.state[0][i], enc.state[0][0])
        assert torch.all(batch.memory[i, n:] == 0)
    export_graphs(model, tmp_path)
    onnx = OnnxModel(tmp_path, ("hidden",), RuntimeConfig(providers=("cpu",)), exact_lengths=True)
    got = onnx.encode(src.numpy(), lengths.numpy())
    np.testing.assert_allclose(got.memory, batch.memory.numpy(), atol=1e-6)
    np.testing.assert_allclose(got.states[0], batch.state[0].numpy(), atol=1e-6)
    assert got.mask.tolist() == batch.mask.tolist()
    # Read without grouping, the same graph sees padding: grouping is what makes it exact.
    plain = OnnxModel(tmp_path, ("hidden",), RuntimeConfig(providers=("cpu",)))
    assert not np.allclose(plain.encode(src.numpy(), lengths.numpy()).states[0], got.states[0])


def test_decoder_without_a_softmax_over_the_source_is_refused():
    class ExpDecoder(_Decoder):
        def forward(self, token, hidden, memory):
            out, hidden = self.rnn(self.emb(token), hidden)
            e = torch.exp(torch.bmm(out, memory.transpose(1, 2)))
            weights = e / e.sum(-1, keepdim=True)
            context = torch.bmm(weights, memory)
            return self.out(torch.cat([out, context], -1)).squeeze(1), hidden, weights.squeeze(1)

    model = _adapted()
    model.decoder.user = ExpDecoder()
    model.decoder.method = model.decoder.user.forward
    enc = model.encode(torch.tensor([[5, 6, 7], [8, 0, 0]]), torch.tensor([3, 1]))
    with pytest.raises(AdapterError, match="no softmax over the source positions"):
        model.decoder(torch.tensor([2, 2]), enc.state, enc.keys, enc.memory, enc.mask)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("raise RuntimeError('mat1 and mat2 shapes cannot be multiplied')", "mat1 and mat2"),
        # a torch op failing inside SourceMask (the decoder takes no mask)
        ("torch.cat([token.float(), memory], 1)", "Tensors must have same number of dim"),
    ],
    ids=["raises", "torch-op"],
)
def test_a_module_that_fails_is_one_line_naming_it(tmp_path, capsys, monkeypatch, body, message):
    from export.cli import main

    module = tmp_path / "broken_model.py"
    module.write_text(
        "import torch\n"
        "from tests.export.test_modules import _Decoder, _Encoder, _bridge\n"
        "from export.modules import Signature\n"
        "from export.user import UserModel\n"
        "from models.words import WordTokenizer\n"
        "class Broken(_Decoder):\n"
        "    def forward(self, token, hidden, memory):\n"
        f"        {body}\n"
        "def load():\n"
        "    words = ['<pad>', '<unk>', '<s>', '</s>'] + [f'w{i}' for i in range(4, 20)]\n"
        "    vocab = WordTokenizer(words, unk_id=1)\n"
        "    specials = dict(pad=0, unk=1, bos=2, eos=3)\n"
        "    sig = Signature(bridge=_bridge)\n"
        "    return UserModel(_Encoder(), Broken(), vocab, vocab, specials, sig)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_model", raising=False)
    out = tmp_path / "m" / "1"
    assert main(["--from-modules", "broken_model:load", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "your decoder step raised" in err and message in err
    assert not out.exists()


class _LstmEncoder(_Encoder):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(6, 4, batch_first=True, bidirectional=True)


class _SequenceFirstEncoder(_Encoder):
    """The older tutorial's RNN (batch_first=False) fed batch-first ids."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(6, 4, bidirectional=True)


class _StepOnlyDecoder(_Decoder):
    """The PyTorch tutorial's AttnDecoderRNN: its step is forward_step, no forward."""

    forward = nn.Module.forward

    def forward_step(self, token, hidden, memory):
        return _Decoder.forward(self, token, hidden, memory)


@pytest.mark.parametrize(
    ("encoder", "decoder", "signature", "vocab", "message"),
    [
        (
            _LstmEncoder,
            _Decoder,
            {"bridge": None},
            20,
            r"hidden is a tuple of 2 .*set Signature\(rnn='lstm'\)",
        ),
        (_Encoder, _Decoder, {"rnn": "lstm"}, 20, r"not an \(h, c\) pair: a GRU\? set"),
        (
            _SequenceFirstEncoder,
            _Decoder,
            {},
            20,
            r"shape \(1, 3, 8\) for a batch of 2.*batch_first=True",
        ),
        (_Encoder, _Decoder, {"bridge": None}, 20, r"2 layers x directions .* 1 layer.*bridge="),
        (_Encoder, _Decoder, {}, 25, "scores 20 tokens but the target tokenizer has 25"),
        (_Encoder, _StepOnlyDecoder, {}, 20, r"decoder_method=\.\.\.\): 'forward_step'\?"),
        (
            _Encoder,
            _Decoder,
            {"decoder_returns": ("logits", "attention", "hidden")},
            20,
            r"shape \(1, 2, 8\); expected \(B, N\): does Signature.decoder_returns",
        ),
    ],
    ids=[
        "lstm-undeclared",
        "gru-declared-lstm",
        "sequence-first",
        "no-bridge",
        "vocab",
        "forward_step",
        "returns-order",
    ],
)
def test_common_signature_mistakes_get_the_fix(encoder, decoder, signature, vocab, message):
    """What users of the tutorial shape get wrong most: each refused in one line that
    names the Signature field to change, before torch fails far from the cause."""
    torch.manual_seed(0)
    sig = Signature(**({"bridge": _bridge} | signature))
    config = BundleConfig(20, vocab, 0, 1, 2, 3, sig.state_names, exact_lengths=True)
    with pytest.raises(AdapterError, match=message):
        model = AdaptedModel(encoder(), decoder(), config=config, signature=sig).eval()
        with torch.no_grad():
            enc = model.encode(torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([3, 3]))
            model.decoder(torch.tensor([2, 2]), enc.state, enc.keys, enc.memory, enc.mask)


def test_a_wrong_argument_list_is_one_error():
    model = _adapted()
    model.decoder.sig = Signature(
        bridge=_bridge, decoder_args=("token", "hidden", "memory", "mask")
    )
    enc = model.encode(torch.tensor([[5, 6, 7]]), torch.tensor([3]))
    with pytest.raises(AdapterError, match=r"your decoder step raised TypeError: .*positional"):
        model.decoder(torch.tensor([2]), enc.state, enc.keys, enc.memory, enc.mask)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"keys": 4}, "'keys' is reserved"),
        ({"src_mask": 4}, "'src_mask' is reserved"),
        ({"coverage": 4}, "'coverage' is reserved"),
        ({"feed": 0}, "needs a size >= 1"),
        ({"feed": "8"}, "needs a size >= 1"),
    ],
)
def test_extra_state_names_and_sizes_are_checked(extra, message):
    names = tuple(extra)
    with pytest.raises(AdapterError, match=message):
        Signature(
            extra_state=extra,
            decoder_args=("token", "hidden", "memory", *names),
            decoder_returns=("logits", "hidden", "attention", *names),
        )


def test_an_extra_state_the_step_never_reads_is_refused():
    with pytest.raises(AdapterError, match="'feed' is not in decoder_args"):
        Signature(
            extra_state={"feed": 8}, decoder_returns=("logits", "hidden", "attention", "feed")
        )


def test_a_bundle_the_server_would_refuse_is_not_written(tmp_path):
    from export.user import UserModel, export_modules
    from export.writer import ExportError
    from models.words import WordTokenizer

    torch.manual_seed(0)
    vocab = WordTokenizer(
        ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, 20)], unk_id=1
    )
    user = UserModel(
        _Encoder(),
        _Decoder(),
        vocab,
        vocab,
        dict(pad=0, unk=1, bos=2, eos=3),
        Signature(bridge=_bridge),
        decoding={"sampling_topk": 5},
    )
    out = tmp_path / "m" / "1"
    with pytest.raises(ExportError, match="nmt-serve would refuse this bundle: .*'sampling_topk'"):
        export_modules(user, out, parity_limit=5, beam_sentences=2)
    assert not out.exists()


def test_from_modules_takes_a_files_path_and_says_how_to_import(tmp_path, monkeypatch, capsys):
    """``--from-modules src/mymodel.py:load`` loads the file; a module that cannot be found
    says where to run from (helper-79's audit: only Python's "No module named")."""
    from export.cli import main
    from export.user import load_user_model
    from export.writer import ExportError

    src = tmp_path / "src"
    src.mkdir()
    (src / "path_model.py").write_text("def load():\n    return 42\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "path_model", raising=False)
    with pytest.raises(ExportError, match="path_model.py:load returned int; it must return"):
        load_user_model("src/path_model.py:load")
    with pytest.raises(ExportError, match=r"cannot import 'src/nothing\.py': no such file"):
        load_user_model("src/nothing.py:load")
    out = tmp_path / "m" / "1"
    assert main(["--from-modules", "mymodle:load", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no module named 'mymodle' in this directory: run nmt-export from the directory" in err
    assert err.count("\n") == 1
