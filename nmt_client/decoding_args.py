"""The decoding flags of ``nmt-translate`` and ``nmt-eval``, declared once: the flags,
their one-line checks, and the :class:`~nmt_client.options.DecodeOptions` they make.

A flag left out leaves the field unset, so the server applies the model's own default
(its manifest's ``decoding``), as for any other client."""

from __future__ import annotations

import argparse
import math

from nmt_api import MAX_BLOCK_NGRAM
from nmt_client.options import DecodeOptions


def add_decoding_args(
    p: argparse.ArgumentParser, *, n_best: bool = True, stream: bool = True
) -> argparse._ArgumentGroup:
    """The "decoding" argument group (``n_best``: with ``--n-best``; ``stream``: the
    command has ``--stream``); returned so that a command can add its own flags to it."""
    d = p.add_argument_group("decoding")
    d.add_argument(
        "--beam",
        metavar="N",
        type=int,
        default=None,
        help="beam size, 1: greedy (default: the model's own, greedy unless its manifest "
        "sets a beam, as an OpenNMT-tf model converted with its beam_width does)",
    )
    if n_best:
        d.add_argument(
            "--n-best",
            metavar="N",
            type=int,
            default=1,
            help="hypotheses per sentence, at most --beam (default: %(default)s)",
        )
    d.add_argument(
        "--length-penalty",
        metavar="LP",
        type=float,
        default=None,
        help="score = log-prob / length^LP (default: the model's, else 1.0)",
    )
    add_length_penalty_form(d)
    d.add_argument(
        "--coverage-penalty",
        metavar="BETA",
        type=float,
        default=None,
        help="GNMT coverage penalty: a finished hypothesis's score adds BETA x sum over "
        "source words of log(min(attention received, 1)) (Eole's -coverage_penalty wu "
        "-beta BETA; default: the model's, else 0)",
    )
    d.add_argument(
        "--max-length",
        metavar="N",
        type=int,
        default=None,
        help="cap on target tokens (default, or 0: the server's)",
    )
    d.add_argument(
        "--min-length",
        metavar="N",
        type=int,
        default=None,
        help="fewest target tokens before EOS (default: the model's)",
    )
    d.add_argument(
        "--ban-unk",
        action="store_true",
        default=None,
        help="never emit the unknown token (Eole's -ban_unk_token)",
    )
    d.add_argument(
        "--block-ngram-repeat",
        metavar="N",
        type=int,
        default=None,
        help="no n-gram of N target tokens twice in a translation (Eole's "
        "-block_ngram_repeat; 0: off, the default)",
    )
    d.add_argument(
        "--ignore-when-blocking",
        metavar="TOKEN",
        action="append",
        default=[],
        help="a target token, spelt as the model's pieces are (nmt-translate "
        "--token-scores shows them), whose n-grams may repeat; repeat the flag for several",
    )
    d.add_argument(
        "--replace-unk",
        action="store_true",
        help="an unknown target token becomes the source word it attended to most "
        "(Eole's -replace_unk" + ("; not with --stream)" if stream else ")"),
    )
    d.add_argument(
        "--diversity-rate",
        metavar="R",
        type=float,
        default=None,
        help="diverse siblings (Li et al. 2016; fairseq's --diversity-rate), with --beam "
        "2 or more: each step the k-th best continuation of a hypothesis loses k x R, so "
        "the n-best list varies more (default: 0, off)",
    )
    d.add_argument(
        "--diverse-beam-groups",
        metavar="G",
        type=int,
        default=None,
        help="diverse beam search (Vijayakumar et al. 2018; fairseq's --diverse-beam-groups): "
        "the beam in G groups (G must divide --beam), each step a group's candidates lose "
        "--diverse-beam-strength for each earlier group's same token (default: off)",
    )
    d.add_argument(
        "--diverse-beam-strength",
        metavar="S",
        type=float,
        default=None,
        help="the penalty of --diverse-beam-groups (default: 0.5)",
    )
    d.add_argument(
        "--sampling-topk",
        metavar="K",
        type=int,
        default=None,
        help="draw each token at random among the K most likely (a number >= the "
        "vocabulary: all of them), e.g. for back-translation; --n-best N: N samples, "
        "--beam B: the --n-best best of B samples",
    )
    d.add_argument(
        "--sampling-temperature",
        metavar="T",
        type=float,
        default=None,
        help="divide the log-probs by T before drawing (default: 1.0)",
    )
    d.add_argument(
        "--sampling-topp",
        metavar="P",
        type=float,
        default=None,
        help="nucleus: of those K, only the most likely whose probabilities add up to P "
        "(default: 1.0, all)",
    )
    d.add_argument(
        "--seed",
        metavar="S",
        type=int,
        default=None,
        help="fixes the draws of --sampling-topk (default: the server picks one)",
    )
    return d


def add_length_penalty_form(group: argparse._ArgumentGroup) -> None:
    """``--length-penalty-form`` (``nmt-translate``, ``nmt-eval``, ``nmt-score``)."""
    group.add_argument(
        "--length-penalty-form",
        choices=("average", "gnmt"),
        default=None,
        help="how --length-penalty LP divides the log-prob: average (length ** LP) or gnmt "
        "(((5 + length) / 6) ** LP: GNMT, Eole's -length_penalty wu; default: the model's)",
    )


def check_decoding_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the decoding flags (``None``: fine), before anything is sent."""
    n_best = getattr(args, "n_best", 1)
    beam = args.beam  # None: the model's own (the server checks what depends on it)
    if (beam is not None and beam < 1) or n_best < 1:
        return "--beam and --n-best must be >= 1"
    if beam is not None and n_best > beam:
        return f"--n-best {n_best} needs --beam {n_best} or more"
    lp = args.length_penalty
    if lp is not None and not (math.isfinite(lp) and lp >= 0):
        return f"--length-penalty {lp} must be a finite number >= 0 (1.0: no preference)"
    c = args.coverage_penalty
    if c is not None and not (math.isfinite(c) and c >= 0):
        return f"--coverage-penalty {c} must be a finite number >= 0 (0: off)"
    if args.max_length is not None and args.max_length < 0:
        return f"--max-length {args.max_length} must be >= 1 (or 0: the server's default)"
    if args.min_length is not None and args.min_length < 0:
        return f"--min-length {args.min_length} must be >= 0"
    n = args.block_ngram_repeat
    if n is not None and not 0 <= n <= MAX_BLOCK_NGRAM:
        return f"--block-ngram-repeat {n} must be between 0 (off) and {MAX_BLOCK_NGRAM}"
    if args.ignore_when_blocking and not n:
        return "--ignore-when-blocking goes with --block-ngram-repeat N (N >= 1)"
    if any(not t for t in args.ignore_when_blocking):
        return "--ignore-when-blocking needs a token, not an empty string"
    r = args.diversity_rate
    if r is not None and not (math.isfinite(r) and r >= 0):
        return f"--diversity-rate {r} must be a finite number >= 0 (0: off)"
    if r and beam == 1:
        return "--diversity-rate ranks a beam's continuations: use it with --beam 2 or more"
    groups, strength = args.diverse_beam_groups, args.diverse_beam_strength
    if groups is not None and groups < 0:
        return f"--diverse-beam-groups {groups} must be >= 0 (0 or 1: off)"
    if (groups or 0) > 1 and beam is not None and beam % groups:
        return f"--diverse-beam-groups {groups} must divide --beam {beam}"
    if (groups or 0) > 1 and r:
        return "--diverse-beam-groups and --diversity-rate are two diverse searches: use one"
    if strength is not None and not (math.isfinite(strength) and strength >= 0):
        return f"--diverse-beam-strength {strength} must be a finite number >= 0"
    if strength is not None and (groups or 0) <= 1:
        return "--diverse-beam-strength goes with --diverse-beam-groups N (N > 1)"
    if args.sampling_topk is not None and args.sampling_topk < 0:
        return f"--sampling-topk {args.sampling_topk} must be >= 0 (0 or 1: no sampling)"
    if (args.sampling_topk or 0) > 1 and (r or (groups or 0) > 1):
        return (
            "--sampling-topk draws its samples independently: not with --diversity-rate or "
            "--diverse-beam-groups"
        )
    t = args.sampling_temperature
    if t is not None and not (math.isfinite(t) and t > 0):
        return f"--sampling-temperature {t} must be a finite number > 0"
    p = args.sampling_topp
    if p is not None and not (math.isfinite(p) and 0 < p <= 1):
        return f"--sampling-topp {p} must be in (0, 1]"
    if args.seed is not None and not 0 <= args.seed < 2**64:
        return f"--seed {args.seed} must be in [0, 2^64)"
    if (args.sampling_topk or 0) <= 1:
        for flag, value in (("--sampling-temperature", t), ("--sampling-topp", p)):
            if value is not None:  # the server refuses it: it would change nothing
                return f"{flag} goes with --sampling-topk N (N > 1): random sampling"
    return None


def options_from_args(args: argparse.Namespace, **fields) -> DecodeOptions:
    """The request options the decoding flags ask for; ``fields``: the command's others
    (what to return)."""
    return DecodeOptions(
        beam_size=args.beam,
        n_best=getattr(args, "n_best", 1),
        length_penalty=args.length_penalty,
        length_penalty_form=args.length_penalty_form,
        coverage_penalty=args.coverage_penalty,
        max_length=args.max_length or None,  # 0: the server's default
        min_length=args.min_length,
        ban_unk=args.ban_unk,
        block_ngram_repeat=args.block_ngram_repeat,
        ignore_when_blocking=tuple(args.ignore_when_blocking),
        replace_unk=args.replace_unk,
        sampling_topk=args.sampling_topk,
        sampling_temperature=args.sampling_temperature,
        sampling_topp=args.sampling_topp,
        seed=args.seed,
        diversity_rate=args.diversity_rate,
        diverse_beam_groups=args.diverse_beam_groups,
        diverse_beam_strength=args.diverse_beam_strength,
        **fields,
    )
