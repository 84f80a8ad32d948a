"""Lexically constrained decoding: translations that must contain given target phrases.

A request may name, per text, phrases its translation must hold (terminology, a name
spelled one way): ``TranslateRequest.constraints``. They are decoded by fairseq's
lexically constrained beam search (``fairseq-interactive --constraints``;
``fairseq/search.py`` ``LexicallyConstrainedBeamSearch``), which implements the dynamic
beam allocation of Post & Vilar (NAACL 2018, https://aclanthology.org/N18-1119/) with the
vectorised bookkeeping of Hu et al. (NAACL 2019, https://aclanthology.org/N19-1090/):

* each hypothesis carries a constraint state (:class:`OrderedState` for phrases that must
  appear in the order given, :class:`UnorderedState`, a trie over the phrases, for any
  order): how many constraint tokens it has met (its *bank*);
* a step's candidates are the best ``2 * beam`` continuations overall, each row's best
  one, and each row's continuation by every token that would advance its state (its
  log-prob read from the step's whole row: :mod:`service.forced`);
* they are sorted by bank, then score, and dealt round-robin across the banks, most
  advanced first, so that hypotheses that met more constraints keep places in the beam;
* a hypothesis may end (EOS) only once its state has met every constraint; then fairseq's
  rules finish hypotheses and keep the live ones (:class:`service.strategies.FairseqBeam`).

The states and the step (:meth:`ConstrainedBeam._candidates`) are ported from fairseq
(MIT licence, commit 3d262bb2), quirks included, so that a converted fairseq model gives
fairseq's own n-best lists (``tests/fixtures/fairseq/*/constraints_*.json``), their
order among equal sort keys included (:func:`torch_sort_order`). Where it differs:

* at the length limit the hypotheses that met their phrases end, best first, as
  fairseq's do; when none of the sentence's did, the live ones end instead, phrases
  unmet (fairseq stops on an assertion), so a request always gets an answer;
* EOS is banned for unmet phrases at the first step too (fairseq leaves that step to
  its ``min_len`` >= 1; a converted Eole model has ``min_length`` 0);
* an EOS candidate at -inf never continues a hypothesis, and which -inf candidates
  fill a step's tail follows a stable sort, not ``torch.topk`` (they end nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models.options import DecodeOptions
from models.scoring import NEG_INF, Eos
from service.ranking import own_columns
from service.strategies import OneByOne, Selection

if TYPE_CHECKING:
    from service.decoding import SentenceSearch

# fairseq's sort key: (unmet tokens) * -100 + score, so banks sort apart only while
# scores stay above -100 (its MAX_SCORE)
_BANK_WEIGHT = -100


@dataclass(frozen=True)
class Constraints:
    """One sentence's constraints: target token ids of each phrase (each at least one
    token); ``ordered``: the phrases must appear in the order given (fairseq's
    ``--constraints ordered``), else in any order (``unordered``)."""

    phrases: tuple[tuple[int, ...], ...]
    ordered: bool = False

    def start(self) -> OrderedState | UnorderedState:
        """The state of a hypothesis that has met nothing yet."""
        if self.ordered:
            return OrderedState(_Sequence(self.phrases), -1)
        return UnorderedState(_Node.trie(self.phrases))


class _Node:
    """A node of the trie of unordered phrases (fairseq's ``ConstraintNode``)."""

    def __init__(self, token: int | None = None, parent: _Node | None = None) -> None:
        self.token = token
        self.parent = parent
        self.terminal = 0  # phrases ending here
        self.children: dict[int, _Node] = {}
        self.num_constraints = 0  # phrases through here
        self._tokens: set[int] | None = None  # tokens(), once asked (the trie is complete)

    @staticmethod
    def trie(phrases: Sequence[Sequence[int]]) -> _Node:
        root = _Node()
        for phrase in phrases:
            root.add(list(phrase))
        return root

    def add(self, phrase: list[int]) -> None:
        token = int(phrase[0])
        if token not in self.children:
            self.children[token] = _Node(token, parent=self)
        node = self.children[token]
        if len(phrase) == 1:
            node.terminal += 1
            node.num_constraints += 1
            parent = node.parent
            while parent is not None:
                parent.num_constraints += 1
                parent = parent.parent
        else:
            node.add(phrase[1:])

    def next_tokens(self) -> set[int]:
        return set(self.children.keys())

    def tokens(self) -> set[int]:
        if self._tokens is None:
            found: set[int] = set()
            kids = list(self.children.values())
            while kids:
                kid = kids.pop()
                found.add(kid.token)
                kids += kid.children.values()
            self._tokens = found
        return self._tokens


class UnorderedState:
    """Progress through phrases that may come in any order (fairseq's
    ``UnorderedConstraintState``): the trie node it is at and the nodes generated and
    completed so far. Immutable: :meth:`advance` returns a new state."""

    def __init__(self, node: _Node, copy_from: UnorderedState | None = None) -> None:
        self.node = node
        # per trie node, times completed / generated (fairseq's Counters, as dicts)
        if copy_from is None:
            self.root = node
            self.completed: dict[_Node, int] = {}
            self.generated: dict[_Node, int] = {}
        else:
            self.completed = dict(copy_from.completed)
            self.generated = dict(copy_from.generated)
            self.root = copy_from.root
        if self.node is not self.root:
            self.generated[node] = self.generated.get(node, 0) + 1
        # advance()'s results by token: states never change, and rows of one lineage
        # advance by the same tokens step after step
        self._next: dict[int, UnorderedState] = {}

    @property
    def bank(self) -> int:
        """Constraint tokens met so far."""
        return sum(self.generated.values())

    @property
    def num_completed(self) -> int:
        """Phrases met, counting one that ends at the current node."""
        node = self.node
        in_final = node.terminal and self.completed.get(node, 0) < node.terminal
        return sum(self.completed.values()) + in_final

    @property
    def finished(self) -> bool:
        """Every phrase met."""
        return self.root.num_constraints == self.num_completed

    @property
    def tokens(self) -> set[int]:
        """The distinct tokens of all phrases."""
        return self.root.tokens()

    def next_tokens(self) -> set[int]:
        """Tokens that would advance: those starting a phrase and, mid-phrase, those
        going on with it."""
        if self.node is not self.root:
            return self.root.next_tokens().union(self.node.next_tokens())
        return self.root.next_tokens()

    def advance(self, token: int) -> UnorderedState:
        token = int(token)
        if self.node is self.root and token not in self.root.children:
            return self  # nothing started, nothing to start: the same state (states never change)
        # a token that neither goes on nor starts a phrase leads to one state, whichever
        key = token if token in self.node.children or token in self.root.children else -1
        known = self._next.get(key)
        if known is None:
            known = self._next[key] = self._advance(token)
        return known

    def _advance(self, token: int) -> UnorderedState:
        nxt = None
        child = self.node.children.get(token)
        generated, completed = self.generated, self.completed
        if child is not None and generated.get(child, 0) < child.num_constraints:
            nxt = UnorderedState(child, copy_from=self)

        def rewind() -> None:
            # fell off the trie: a phrase ending on the way back up counts as completed
            node = self.node
            while node is not self.root:
                if node.terminal and completed.get(node, 0) < node.terminal:
                    nxt.completed[node] = nxt.completed.get(node, 0) + 1
                    return
                nxt.generated[node] = nxt.generated.get(node, 0) - 1
                node = node.parent

        if nxt is None and token in self.root.next_tokens():
            child = self.root.children[token]
            if generated.get(child, 0) < child.num_constraints:
                nxt = UnorderedState(child, copy_from=self)
            else:
                nxt = UnorderedState(self.root, copy_from=self)
            rewind()
        elif nxt is None:
            nxt = UnorderedState(self.root, copy_from=self)
            rewind()
        return nxt


class _Sequence:
    """Ordered phrases concatenated, with where each ends (fairseq's
    ``ConstraintSequence``)."""

    def __init__(self, phrases: Sequence[Sequence[int]]) -> None:
        self.tokens_: list[int] = []
        self.endpoints: list[bool] = []
        self.token_set: set[int] = set()
        for phrase in phrases:
            self.token_set.update(phrase)
            self.endpoints += [False] * (len(phrase) - 1) + [True]
            self.tokens_ += list(phrase)


class OrderedState:
    """Progress through phrases that must come in order, anything between them
    (fairseq's ``OrderedConstraintState``): the index of the last token met (-1:
    none). Immutable."""

    def __init__(self, sequence: _Sequence, state: int) -> None:
        self.sequence = sequence
        self.state = state

    @property
    def bank(self) -> int:
        return self.state + 1

    @property
    def num_completed(self) -> int:
        """Phrases met (those whose last token is at or before :attr:`state`)."""
        return sum(self.sequence.endpoints[: self.state + 1]) if self.state >= 0 else 0

    @property
    def finished(self) -> bool:
        return self.state + 1 == len(self.sequence.tokens_)

    @property
    def tokens(self) -> set[int]:
        return self.sequence.token_set

    def next_tokens(self) -> set[int]:
        tokens = set()
        if self.state > 0:
            tokens.add(self.sequence.tokens_[0])
        if not self.finished:
            tokens.add(self.sequence.tokens_[self.state + 1])
        return tokens

    def advance(self, token: int) -> OrderedState:
        seq, token = self.sequence, int(token)
        if self.finished:
            return self
        if seq.tokens_[self.state + 1] == token:
            return OrderedState(seq, self.state + 1)
        if seq.endpoints[self.state]:  # between phrases (or before the first): anything
            return self
        if token == seq.tokens_[0]:  # broke off a phrase: starts over with this token
            return OrderedState(seq, 0)
        return OrderedState(seq, -1)


class ConstrainedBeam(OneByOne):
    """The search of a sentence with constraints, for any beam size (see the module
    docstring). The loop hands each constrained sentence its step's whole log-prob rows
    (:attr:`service.decoding.SentenceSearch.step_log_probs`)."""

    def top_k(self, options: DecodeOptions) -> int:
        return 2 * options.beam_size

    def _candidates(
        self, s: SentenceSearch, first: int, values: np.ndarray, ids: np.ndarray
    ) -> list[tuple[float, int, int, object]]:
        """fairseq's ``LexicallyConstrainedBeamSearch.step`` for one sentence: its
        candidates ``(cumulative log-prob, token, row, new state)`` in the order its
        generator reads them (round-robin over banks), at most ``2 * beam``."""
        states = s.constraint_states
        beam = s.options.beam_size
        num_cands = 2 * beam
        rows = s.rows
        v, i = own_columns(values[first : first + rows], ids[first : first + rows], s.top_k)
        # EOS only for hypotheses that met every constraint (fairseq from step 1 on,
        # leaving step 0 to its min_len >= 1; a model may have min_length 0)
        unmet = [r for r in range(rows) if not states[r].finished]
        if unmet:
            v = v.copy()
            v[unmet, -1] = NEG_INF  # own_columns keeps EOS last
        scores32 = np.array(s.scores, dtype=np.float32)
        total = scores32[:, None] + v  # (rows, k + 1) cumulative, float32 as fairseq's
        flat = total.ravel()
        order = np.argsort(-flat, kind="stable")[:num_cands]
        width = v.shape[1]
        cands = [(float(flat[j]), int(i.ravel()[j]), int(j // width)) for j in order]
        if s.step > 0:  # each row's best continuation
            best = total.argmax(axis=1)
            for r in range(rows):
                cands.append((float(total[r, best[r]]), int(i[r, best[r]]), r))
        # each row's continuation by every token that advances its state
        every = s.step_log_probs
        for r in range(rows):
            banned = s.bans[r] if s.bans is not None else ()
            for tok in list(states[r].next_tokens()):
                lp = NEG_INF if tok in banned else every[r, tok]
                cands.append((float(scores32[r] + np.float32(lp)), tok, r))
            if s.step == 0:
                break
        new_states = [states[r].advance(tok) for _, tok, r in cands]
        banks = [st.bank for st in new_states]
        num_tokens = len(states[0].tokens)
        keys = np.array(
            [
                (num_tokens - b) * _BANK_WEIGHT + np.float32(c[0])
                for b, c in zip(banks, cands, strict=True)
            ],
            dtype=np.float32,
        )
        order = torch_sort_order(keys.tolist(), descending=True)
        cands = [cands[i] for i in order]
        banks = [banks[i] for i in order]
        new_states = [new_states[i] for i in order]
        # duplicates (the same row and token) sit next to each other; fairseq compares
        # each with the one before it, the first with the last
        codes = [(r, tok) for _, tok, r in cands]
        keep = [codes[i - 1] != codes[i] for i in range(len(codes))]
        kept_states = list(new_states)
        i = 1
        for k in keep[1:]:
            if not k:
                kept_states.pop(i)
            i += k
        cands = [c for c, k in zip(cands, keep, strict=True) if k]
        banks = [b for b, k in zip(banks, keep, strict=True) if k]
        # round-robin over the banks, most advanced first
        n = len(banks)
        stripes = []
        count, bank = -1, banks[0] if banks else 0
        for b in banks:
            if b != bank:
                count, bank = 0, b
            else:
                count += 1
            stripes.append(num_tokens - b + count * (n + 1))
        # many stripes are equal (a bank's count restarts wherever banks interleave):
        # their order is what PyTorch's sort leaves, as in fairseq
        order = torch_sort_order(stripes)
        return [(*cands[i], kept_states[i]) for i in order][:num_cands]

    def _choose(self, s: SentenceSearch, first: int, values, ids) -> Selection:
        """fairseq's generator over the candidates: an EOS among the first ``beam``
        finishes its hypothesis (no more than the sentence still needs), the first
        ``beam`` others go on, at -inf too (a token banned by ``block_ngram_repeat``:
        fairseq keeps such a dead hypothesis in its beam, where it holds a place)."""
        beam = s.options.beam_size
        room = beam - s.finished
        if s.eos_rule() is Eos.FORCED:
            return self._at_limit(s, first, values, room)
        parents, tokens, scores, finished, states = [], [], [], [], []
        for place, (score, tok, row, state) in enumerate(self._candidates(s, first, values, ids)):
            if tok == s.eos and score != NEG_INF:
                if place < beam and len(finished) < room:
                    finished.append((row, score))
                continue
            if len(parents) < beam:
                parents.append(row)
                tokens.append(tok)
                scores.append(score)
                states.append(state)
        done = s.finished + len(finished) >= beam or not parents
        return Selection(parents, tokens, scores, finished, done, states=tuple(states))

    @staticmethod
    def _at_limit(s: SentenceSearch, first: int, values: np.ndarray, room: int) -> Selection:
        """The length limit: the live hypotheses that hold every phrase end, best first,
        as many as the sentence still needs (fairseq's rule: the others' EOS is -inf).
        When no hypothesis of the sentence holds them (none ended before, none here),
        the live ones end instead, best first, their phrases unmet: fairseq stops on an
        assertion there; a request gets an answer. Dead ones (-inf) never end."""
        eos = values[first : first + s.rows, -1]
        total = [float(np.float32(s.scores[r]) + eos[r]) for r in range(s.rows)]
        alive = [r for r in range(s.rows) if total[r] != NEG_INF]
        met = [r for r in alive if s.constraint_states[r].finished]
        ending = met if met or s.finished else alive
        ending = sorted(ending, key=lambda r: -total[r])[:room]
        return Selection([], [], [], [(r, total[r]) for r in ending], True, states=())


# libstdc++'s std::sort leaves elements in its final insertion sort below this size
_INSERTION_SORT = 16


def torch_sort_order(values: list, descending: bool = False) -> list[int]:
    """The indices in the order ``torch.sort`` leaves ``values`` on the CPU (not stable:
    it runs libstdc++'s ``std::sort``, an introsort, over (value, index) pairs), which
    decides fairseq's order among equal sort keys. Written after libstdc++'s
    ``bits/stl_algo.h``; checked against torch 2.13 on 600 tie-heavy arrays in
    ``tests/service/test_constraints.py`` (3,000 in a scratch run)."""
    if len(set(values)) == len(values):  # no ties: every sort gives the same order
        return sorted(range(len(values)), key=values.__getitem__, reverse=descending)
    # (key, index) pairs as two lists moved together; "less" is key < key (keys negated
    # for a descending sort, which keeps ties tied)
    k = [-x for x in values] if descending else list(values)
    a = list(range(len(values)))

    def swap(i: int, j: int) -> None:
        k[i], k[j] = k[j], k[i]
        a[i], a[j] = a[j], a[i]

    def median_to_first(result: int, x: int, y: int, z: int) -> None:
        if k[x] < k[y]:
            pick = y if k[y] < k[z] else (z if k[x] < k[z] else x)
        else:
            pick = x if k[x] < k[z] else (z if k[y] < k[z] else y)
        swap(result, pick)

    def partition(first: int, last: int, pivot: int) -> int:
        p = k[pivot]  # the pivot stays put while the range right of it is split
        while True:
            while k[first] < p:
                first += 1
            last -= 1
            while p < k[last]:
                last -= 1
            if not first < last:
                return first
            swap(first, last)
            first += 1

    def introsort(first: int, last: int, depth: int) -> None:
        while last - first > _INSERTION_SORT:
            if depth == 0:  # std::sort turns to heapsort here; never seen at these sizes
                pairs = sorted(zip(k[first:last], a[first:last], strict=True))
                k[first:last], a[first:last] = [x for x, _ in pairs], [i for _, i in pairs]
                return
            depth -= 1
            median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    def linear_insert(last: int) -> None:
        key, index = k[last], a[last]
        while key < k[last - 1]:
            k[last], a[last] = k[last - 1], a[last - 1]
            last -= 1
        k[last], a[last] = key, index

    n = len(a)
    if n:
        introsort(0, n, 2 * (n.bit_length() - 1))
        for i in range(1, min(n, _INSERTION_SORT)):  # insertion sort of the first 16
            if k[i] < k[0]:
                k[: i + 1], a[: i + 1] = [k[i], *k[:i]], [a[i], *a[:i]]
            else:
                linear_insert(i)
        for i in range(_INSERTION_SORT, n):
            linear_insert(i)
    return a


CONSTRAINED: ConstrainedBeam = ConstrainedBeam()
