"""Calibration objectives as token-level linear functionals of next-token log-probabilities.

Both objectives of docs/method.md §2 are linear in the log-probabilities of chosen target tokens:
- perplexity: L = −(1/T) Σ_t log p_t over all real tokens;
- task likelihood margin: L = (1/n) Σ_items Σ_{k≠y} (ℓ_k − ℓ_y) with ℓ_k the mean log-probability of
  candidate k's continuation, i.e. L = Σ_t c_t log p_t with c_t = w_{seq(t)} / len(seq(t)).
So an objective is: token sequences, the positions whose next token is scored, a coefficient per
scored position, and (for TLM) the map from scored positions to candidates for the accuracy.
The bounded TLM control ``tlm.loss: cross_entropy`` (L = (1/n) Σ_items [log Σ_k exp ℓ_k − ℓ_y] ≥ 0)
is not linear in the log-probabilities: its coefficients give the ℓ_k (c_t = 1 / len(seq(t))), and
``Objective.reduce`` / ``batch_loss`` apply the log-softmax per item. The
evaluator only needs hidden states at scored positions: the LM head runs nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from depthprune.calibration import data as calib_data
from depthprune.calibration.specs import (  # noqa: F401 (CALIBRATIONS, C4_PACKINGS re-exported)
    C4_PACKINGS,
    CALIBRATIONS,
    TLM_LOSSES,
)
from depthprune.calibration.tlm import TLMItem
from depthprune.engine.records import ItemScores
from depthprune.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """One padded micro-batch with the positions whose next token is scored."""

    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]
    flat_positions: torch.Tensor  # indices into the flattened [B*T] hidden states
    targets: torch.Tensor  # next-token ids at those positions
    coefficients: torch.Tensor  # float64, loss = Σ coefficients · log p
    sequence_ids: torch.Tensor  # global sequence (candidate) id per scored position
    # Shared-context rows (depthprune.engine.tree_attention): position id, branch (-1 padding) and the
    # branch of its tree's shared prefix per token. None for plain left-aligned causal rows.
    position_ids: torch.Tensor | None = None  # [B, T]
    branch_ids: torch.Tensor | None = None  # [B, T]
    root_ids: torch.Tensor | None = None  # [B, T] the branch id of the shared prefix of each token's tree

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())


@dataclass
class Objective:
    kind: str  # "perplexity" | "tlm"
    batches: list[Batch]
    n_scored: int
    # TLM only: per sequence, (item index, candidate index); gold per item.
    candidate_of_sequence: list[tuple[int, int]] = field(default_factory=list)
    gold: list[int] = field(default_factory=list)
    data_hash: str = ""
    tlm_loss: str = "margin"  # TLM: margin (linear in log p) or cross_entropy (log-softmax over ℓ_k)
    # TLM: a digest of each item's scored token sequences, gold and loss, in draw order. A prior of
    # a larger draw whose item_keys begin with these can give this draw's prior (prior.derive_prior).
    item_keys: list[str] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(b.n_tokens for b in self.batches)

    def batch_loss(self, batch: Batch, token_logprobs: torch.Tensor) -> torch.Tensor:
        """This batch's additive share of L (differentiable; used for gate derivatives too)."""
        weighted = batch.coefficients.to(token_logprobs.device, torch.float64) * token_logprobs.double()
        if self.tlm_loss != "cross_entropy":
            return weighted.sum()
        # Cross-entropy is additive over items, and an item's candidates share one tree row
        # (shared context), so each batch holds whole items.
        means = torch.zeros(len(self.candidate_of_sequence), dtype=torch.float64, device=weighted.device)
        means = means.index_add(0, batch.sequence_ids.to(weighted.device), weighted)
        present = set(batch.sequence_ids.tolist())
        items = sorted({self.candidate_of_sequence[q][0] for q in present})
        split = [i for i in items if not set(self._item_sequences()[i]) <= present]
        if split:
            raise InputError(
                f"tlm.loss cross_entropy: items {split[:5]} have candidates in several batches; "
                "use --tlm-context shared (each item's candidates in one row)"
            )
        return self._cross_entropy(means, items)

    @property
    def n_samples(self) -> int:
        """The calibration samples L averages over: the sequences (perplexity) or the items (TLM)."""
        if self.candidate_of_sequence:
            return len(self.gold)
        return len({int(q) for batch in self.batches for q in batch.sequence_ids.tolist()})

    def sample_shares(self, batch: Batch, token_logprobs: torch.Tensor) -> dict[int, torch.Tensor]:
        """``batch_loss`` split by calibration sample (a sequence under perplexity, an item under
        TLM): sample id -> its additive share of L (differentiable; the shares sum to
        ``batch_loss``). CBO's per-sample gradient rows read them (engine/gate_fisher.py)."""
        weighted = batch.coefficients.to(token_logprobs.device, torch.float64) * token_logprobs.double()
        ids = batch.sequence_ids.tolist()
        if self.candidate_of_sequence:
            ids = [self.candidate_of_sequence[q][0] for q in ids]
        if self.candidate_of_sequence and self.tlm_loss == "cross_entropy":
            means = torch.zeros(len(self.candidate_of_sequence), dtype=torch.float64, device=weighted.device)
            means = means.index_add(0, batch.sequence_ids.to(weighted.device), weighted)
            return {item: self._cross_entropy(means, [item]) for item in sorted(set(ids))}
        index = torch.tensor(ids, device=weighted.device)
        return {sample: weighted[index == sample].sum() for sample in sorted(set(ids))}

    def reduce(self, per_batch_logprobs: list[torch.Tensor]) -> tuple[float, float | None]:
        """(loss, calibration accuracy or None) from the scored log-probs of every batch."""
        loss, accuracy, _ = self.scores(per_batch_logprobs)
        return loss, accuracy

    def scores(self, per_batch_logprobs: list[torch.Tensor]) -> tuple[float, float | None, ItemScores | None]:
        """``reduce``'s loss and accuracy, and for TLM the item-by-item scores the accuracy is taken from."""
        if self.tlm_loss == "cross_entropy":
            means = torch.zeros(len(self.candidate_of_sequence), dtype=torch.float64)
            for batch, lp in zip(self.batches, per_batch_logprobs):
                weighted = batch.coefficients.to(torch.float64) * lp.detach().double().cpu()
                means.index_add_(0, batch.sequence_ids.cpu(), weighted)
            loss = float(self._cross_entropy(means, range(len(self.gold))))
        else:
            loss = sum(float(self.batch_loss(b, lp)) for b, lp in zip(self.batches, per_batch_logprobs))
        if self.kind != "tlm":
            return loss, None, None
        items = self.item_scores(per_batch_logprobs)
        return loss, float(np.mean(items.correct)), items

    def _item_sequences(self) -> list[list[int]]:
        """Sequence ids of each item's candidates, in candidate order."""
        if not hasattr(self, "_sequences_of_item"):
            per_item: list[list[int]] = [[] for _ in self.gold]
            for q, (item, _) in sorted(enumerate(self.candidate_of_sequence), key=lambda e: e[1]):
                per_item[item].append(q)
            self._sequences_of_item = per_item
        return self._sequences_of_item

    def _cross_entropy(self, means: torch.Tensor, items) -> torch.Tensor:
        """(1/n) Σ over ``items`` of log Σ_k exp ℓ_k − ℓ_gold, ℓ = ``means`` (one per sequence)."""
        total = means.new_zeros(())
        for i in items:
            candidates = means[self._item_sequences()[i]]
            total = total + torch.logsumexp(candidates, dim=0) - candidates[self.gold[i]]
        return total / len(self.gold)

    def item_scores(self, per_batch_logprobs: list[torch.Tensor]) -> ItemScores:
        """TLM: each item's share of L (L is their mean, up to float rounding) and whether its gold
        candidate has the highest mean log-probability (the first of tied candidates wins)."""
        n_seq = len(self.candidate_of_sequence)
        sums = torch.zeros(n_seq, dtype=torch.float64)
        counts = torch.zeros(n_seq, dtype=torch.float64)
        for batch, lp in zip(self.batches, per_batch_logprobs):
            ids = batch.sequence_ids.cpu()
            sums.index_add_(0, ids, lp.detach().double().cpu())
            counts.index_add_(0, ids, torch.ones_like(ids, dtype=torch.float64))
        mean = (sums / counts).numpy()
        losses, correct = np.empty(len(self.gold)), np.empty(len(self.gold), dtype=bool)
        for i, (sequences, gold) in enumerate(zip(self._item_sequences(), self.gold)):
            ell = mean[sequences]  # candidates in order
            if self.tlm_loss == "cross_entropy":
                losses[i] = np.logaddexp.reduce(ell) - ell[gold]
            else:
                losses[i] = ell.sum() - len(ell) * ell[gold]  # Σ_{k≠y} (ℓ_k − ℓ_y)
            correct[i] = int(np.argmax(ell)) == gold
        return ItemScores(losses, correct)

    def metric(self, loss: float) -> float:
        """Calibration perplexity for perplexity objectives (exp L); the loss itself for TLM."""
        return math.exp(loss) if self.kind == "perplexity" else loss


@dataclass
class _Sequence:
    ids: list[int]
    first_scored: int  # index of the first token whose prediction is scored
    coefficient_per_token: float  # c_t for each scored token
    sequence_id: int


def _pack(sequences: list[_Sequence], pad_id: int, token_budget: int) -> list[Batch]:
    """Greedy length-sorted packing into micro-batches of at most ``token_budget`` padded tokens."""
    order = sorted(range(len(sequences)), key=lambda i: (-len(sequences[i].ids), i))
    groups: list[list[int]] = []
    for index in order:
        longest = len(sequences[groups[-1][0]].ids) if groups else 0
        if groups and longest * (len(groups[-1]) + 1) <= token_budget:
            groups[-1].append(index)
        else:
            groups.append([index])
    batches = []
    for group in groups:
        width = len(sequences[group[0]].ids)
        input_ids = torch.full((len(group), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        positions, targets, coefficients, sequence_ids = [], [], [], []
        for row, index in enumerate(group):
            seq = sequences[index]
            input_ids[row, : len(seq.ids)] = torch.tensor(seq.ids)
            mask[row, : len(seq.ids)] = 1
            for t in range(seq.first_scored, len(seq.ids)):
                positions.append(row * width + t - 1)  # hidden at t-1 predicts token t
                targets.append(seq.ids[t])
                coefficients.append(seq.coefficient_per_token)
                sequence_ids.append(seq.sequence_id)
        batches.append(scored_batch(input_ids, mask, positions, targets, coefficients, sequence_ids))
    return batches


def scored_batch(input_ids, mask, positions, targets, coefficients, sequence_ids, **tree) -> Batch:
    """A Batch from per-token python lists (flat scored positions, targets, coefficients, sequence
    ids); ``tree`` holds the shared-context fields (position_ids, branch_ids, root_ids)."""
    return Batch(
        input_ids=input_ids,
        attention_mask=mask,
        flat_positions=torch.tensor(positions, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        coefficients=torch.tensor(coefficients, dtype=torch.float64),
        sequence_ids=torch.tensor(sequence_ids, dtype=torch.long),
        **tree,
    )


def _common_prefix(sequences: list[_Sequence]) -> int:
    """Length of the token prefix all ``sequences`` share, leaving every one at least one own token."""
    limit = min(len(s.ids) for s in sequences) - 1
    first = sequences[0].ids
    n = 0
    while n < limit and all(s.ids[n] == first[n] for s in sequences):
        n += 1
    return n


# Row widths tried, as multiples of the longest tree, and the attention cost model that weighs them:
# a padded token costs 1 + width / ROW_ATTENTION_SCALE (its blocks' matrix products, plus attention
# over the whole row, which grows with the width whatever the mask lets through).
ROW_WIDTH_FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)
ROW_ATTENTION_SCALE = 4096


def _first_fit_decreasing(sizes: list[int], width: int) -> tuple[list[list[int]], list[int]]:
    """Item indices per row, longest first, each into the first row with room; and each row's room."""
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        row = next((r for r, free in enumerate(room) if free >= sizes[index]), None)
        if row is None:
            rows.append([])
            room.append(width)
            row = len(rows) - 1
        rows[row].append(index)
        room[row] -= sizes[index]
    return rows, room


def _row_width(sizes: list[int], token_budget: int) -> int:
    """The row width that costs least by the model above. Rows exactly as wide as the longest tree
    waste most of a row when the trees are between half and all of its width (LAMBADA's passages:
    43 % padding); a few times wider, they share rows. Never wider than ``token_budget`` allows
    (or the longest tree)."""
    longest = max(sizes)
    best, best_cost = longest, None
    for factor in ROW_WIDTH_FACTORS:
        width = int(longest * factor)
        if width > max(longest, token_budget):
            break
        rows, _ = _first_fit_decreasing(sizes, width)
        cost = len(rows) * width * (1 + width / ROW_ATTENTION_SCALE)  # padded tokens, weighted
        if best_cost is None or cost < best_cost:
            best, best_cost = width, cost
    return best


def _pack_trees(items: list[list[_Sequence]], pad_id: int, token_budget: int) -> list[Batch]:
    """Trees, one per item: the candidates' shared prefix once, then each candidate's own tokens.

    Trees are packed first-fit-decreasing into rows (several short items share a row, so little is
    padding) of the width ``_row_width`` picks, rows into micro-batches of at most ``token_budget``
    padded tokens. Scored positions, targets and coefficients are those of the separate sequences,
    mapped into the rows; ``position_ids``, ``branch_ids`` and ``root_ids`` drive the tree attention
    mask (depthprune.engine.tree_attention).
    """
    trees = []
    for sequences in items:
        shared = _common_prefix(sequences)
        ids, positions, branches = list(sequences[0].ids[:shared]), list(range(shared)), [0] * shared
        scored = []  # (index in the tree of the hidden state, target, coefficient, sequence id)
        for k, seq in enumerate(sequences, start=1):
            offset = len(ids) - shared  # tree index of the token at sequence index t ≥ shared: t + offset
            ids += seq.ids[shared:]
            positions += range(shared, len(seq.ids))
            branches += [k] * (len(seq.ids) - shared)
            for t in range(seq.first_scored, len(seq.ids)):
                source = t - 1 if t - 1 < shared else t - 1 + offset  # hidden at t-1 predicts token t
                scored.append((source, seq.ids[t], seq.coefficient_per_token, seq.sequence_id))
        trees.append((ids, positions, branches, scored))
    sizes = [len(tree[0]) for tree in trees]
    width = _row_width(sizes, token_budget)
    rows, room = _first_fit_decreasing(sizes, width)
    per_batch = max(1, token_budget // width)
    batches = []
    for first in range(0, len(rows), per_batch):
        group = rows[first : first + per_batch]
        length = max(width - room[first + r] for r in range(len(group)))
        input_ids = torch.full((len(group), length), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), length), dtype=torch.long)
        position_ids = torch.zeros((len(group), length), dtype=torch.long)
        branch_ids = torch.full((len(group), length), -1, dtype=torch.long)
        root_ids = torch.full((len(group), length), -1, dtype=torch.long)
        flat, targets, coefficients, sequence_ids = [], [], [], []
        for r, tree_indices in enumerate(group):
            start, label = 0, 0  # next free column; branch labels unique within the row
            for index in tree_indices:
                ids, positions, branches, scored = trees[index]
                stop = start + len(ids)
                input_ids[r, start:stop] = torch.tensor(ids)
                mask[r, start:stop] = 1
                position_ids[r, start:stop] = torch.tensor(positions)
                branch_ids[r, start:stop] = torch.tensor(branches) + label
                root_ids[r, start:stop] = label  # the tree's prefix label
                for source, target, coefficient, sequence_id in scored:
                    flat.append(r * length + start + source)
                    targets.append(target)
                    coefficients.append(coefficient)
                    sequence_ids.append(sequence_id)
                start, label = stop, label + max(branches, default=0) + 1
        batches.append(
            scored_batch(
                input_ids,
                mask,
                flat,
                targets,
                coefficients,
                sequence_ids,
                position_ids=position_ids,
                branch_ids=branch_ids,
                root_ids=root_ids,
            )
        )
    return batches


def _hash_batches(batches: list[Batch]) -> str:
    digest = hashlib.sha256()
    for batch in batches:
        for tensor in (batch.input_ids, batch.attention_mask, batch.flat_positions, batch.targets, batch.coefficients):
            digest.update(tensor.numpy().tobytes())
        if batch.branch_ids is not None:  # shared-context rows: a different computation, another key
            digest.update(
                b"tree"
                + batch.position_ids.numpy().tobytes()
                + batch.branch_ids.numpy().tobytes()
                + batch.root_ids.numpy().tobytes()
            )
    return digest.hexdigest()[:16]


def exact_length_ids(texts: list[str], reserve: list[str], tokenizer, seq_len: int) -> list[list[int]]:
    """One sequence of exactly ``seq_len`` tokens per drawn document (the paper: 64 x 2048 tokens).

    A drawn document of at least ``seq_len`` tokens gives its first ``seq_len`` tokens, as the
    draw always did (so a draw whose documents are all long enough is unchanged, token for token).
    A shorter one is continued with the next documents of ``reserve`` (the pool's undrawn documents
    in seeded order), each tokenised on its own with its special tokens, until ``seq_len`` tokens:
    documents concatenated into one stream and cut at ``seq_len``, as C4 calibration is packed in
    the field (SparseGPT/Wanda keep drawing until a window of ``seq_len`` tokens exists).
    """
    stream = iter(reserve)
    sequences = []
    for text in texts:
        ids = tokenizer(text, add_special_tokens=True)["input_ids"][:seq_len]
        while len(ids) < seq_len:
            following = next(stream, None)
            if following is None:
                raise InputError(
                    f"calibration data: the C4 pool has too few tokens for {len(texts)} sequences of "
                    f"seq_len={seq_len} tokens (calibration n_samples / seq_len)"
                )
            ids = (ids + tokenizer(following, add_special_tokens=True)["input_ids"])[:seq_len]
        sequences.append(ids)
    return sequences


def perplexity_objective(
    texts: list[str], tokenizer, seq_len: int, token_budget: int, reserve: list[str] | None = None
) -> Objective:
    """Token-weighted mean NLL; ``reserve`` given (C4): every sequence exactly ``seq_len`` tokens
    (:func:`exact_length_ids`), else each text cut at ``seq_len`` tokens (Commonsense-170k items)."""
    if reserve is not None:
        token_ids = exact_length_ids(texts, reserve, tokenizer, seq_len)
    else:
        token_ids = [tokenizer(text, add_special_tokens=True)["input_ids"][:seq_len] for text in texts]
    sequences = []
    for i, ids in enumerate(token_ids):
        if len(ids) >= 2:
            sequences.append(_Sequence(ids=ids, first_scored=1, coefficient_per_token=0.0, sequence_id=i))
    if not sequences:
        raise InputError("calibration data: every sample is shorter than two tokens")
    n_scored = sum(len(s.ids) - 1 for s in sequences)
    for seq in sequences:
        seq.coefficient_per_token = -1.0 / n_scored  # token-weighted mean NLL
    batches = _pack(sequences, tokenizer.pad_token_id, token_budget)
    return Objective(kind="perplexity", batches=batches, n_scored=n_scored, data_hash=_hash_batches(batches))


def tlm_objective(
    items: list[TLMItem],
    requests: list[list[tuple[str, str]]],
    tokenizer,
    seq_len: int,
    token_budget: int,
    shared_context: bool = True,
    loss: str = "margin",
) -> Objective:
    """The TLM objective; ``shared_context`` packs each item's candidates into one tree row (the
    context computed once, docs/method.md §5), else one sequence per candidate. Same losses.
    ``loss``: margin (Σ_{k≠y}(ℓ_k − ℓ_y) per item, [22]'s) or cross_entropy (−log softmax_y ℓ)."""
    if loss not in TLM_LOSSES:
        raise InputError(f"tlm loss {loss!r} (option --tlm-loss / tlm.loss): expected one of {', '.join(TLM_LOSSES)}")
    sequences, candidate_of_sequence = [], []
    per_item: list[list[_Sequence]] = []
    n_items = len(items)
    for item_index, (item, pairs) in enumerate(zip(items, requests)):
        per_item.append([])
        n_cand = len(pairs)
        for cand, (context, continuation) in enumerate(pairs):
            # Tokenise context and continuation separately, as lm-eval does.
            ctx = tokenizer(context, add_special_tokens=True)["input_ids"]
            cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
            if not cont:
                raise InputError(f"TLM item {item_index}: candidate {cand} has an empty continuation")
            ids = (ctx + cont)[-seq_len:]  # keep the continuation; drop context from the left
            first = max(1, len(ids) - len(cont))
            # Σ_{k≠y}(ℓ_k − ℓ_y) / n: weight +1 for wrong candidates, −(K−1) for the gold one.
            # Cross-entropy: weight 1, the coefficients give ℓ_k itself (reduce applies the softmax).
            weight = 1.0 if loss == "cross_entropy" else (-(n_cand - 1) if cand == item.gold else 1.0) / n_items
            sequences.append(
                _Sequence(
                    ids=ids,
                    first_scored=first,
                    coefficient_per_token=weight / (len(ids) - first),
                    sequence_id=len(candidate_of_sequence),
                )
            )
            per_item[-1].append(sequences[-1])
            candidate_of_sequence.append((item_index, cand))
    if shared_context:
        batches = _pack_trees(per_item, tokenizer.pad_token_id, token_budget)
    else:
        batches = _pack(sequences, tokenizer.pad_token_id, token_budget)
    n_scored = sum(len(b.targets) for b in batches)
    item_keys = [
        _hash_text(json.dumps([loss, item.gold, [[s.ids, s.first_scored] for s in sequences]]))
        for item, sequences in zip(items, per_item)
    ]
    return Objective(
        kind="tlm",
        batches=batches,
        n_scored=n_scored,
        candidate_of_sequence=candidate_of_sequence,
        gold=[item.gold for item in items],
        # The loss is part of what is computed: its name enters the hash (memo key, prior check).
        data_hash=_hash_batches(batches) if loss == "margin" else _hash_text(_hash_batches(batches) + loss),
        tlm_loss=loss,
        item_keys=item_keys,
    )


def _hash_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class CalibrationSamples:
    """The sampled calibration data, read and checked before any model is loaded.

    Perplexity objectives: ``texts``. TLM: parsed ``items`` and their (context, continuation)
    ``requests``. Everything that can be wrong with the data is found here, naming file and line.
    """

    calibration: str
    texts: list[str] | None = None
    # C4: the pool's undrawn documents in seeded order, continuing drawn documents shorter than
    # seq_len (exact_length_ids)
    reserve: list[str] | None = None
    items: list[TLMItem] | None = None
    requests: list[list[tuple[str, str]]] | None = None


def load_calibration_samples(setup, heldout: int | None = None) -> CalibrationSamples:
    """Read, sample and validate the calibration data of ``setup`` (a calibration/setup.py
    ``CalibrationSetup``; docs/method.md §2); no tokenizer needed.

    ``heldout``: instead of the sample, that many rows of the fixed held-out draw
    (calibration/heldout.py), after checking that the sample (``seed``, ``n_samples``) shares none of them.
    """
    calibration, n_samples, seed = setup.calibration, setup.n_samples, setup.seed
    source = setup.source  # calibration/sources.py: the one place that knows how this source is read
    rows = source.load(setup.data_dir, setup.dataset)
    if heldout is None:
        indices, reserve = calib_data.sample_indices_and_reserve(len(rows), n_samples, seed, source.rows)
    else:
        from depthprune.calibration.heldout import check_disjoint, heldout_indices, reserved_indices

        indices = heldout_indices(len(rows), heldout, source.name)
        check_disjoint(len(rows), n_samples, seed, indices, source.name)
        # continued by documents neither held out nor in the sample, in seeded order
        _, sample_reserve = calib_data.sample_indices_and_reserve(len(rows), n_samples, seed, source.rows)
        # (never another seed's calibration rows either: the held-out text stays disjoint from them)
        held = set(indices) | reserved_indices(len(rows), source.name)
        reserve = [i for i in sample_reserve if i not in held]
    if setup.spec.objective == "perplexity":
        texts = source.texts(rows, indices)
        if not source.continues_documents:
            return CalibrationSamples(calibration, texts=texts)
        return CalibrationSamples(calibration, texts=texts, reserve=source.texts(rows, reserve))
    items, requests = source.tlm_items(rows, indices, setup.tlm_format)
    return CalibrationSamples(calibration, items=items, requests=requests)


def build_objective(setup, tokenizer, token_budget: int = 8192, samples: CalibrationSamples | None = None) -> Objective:
    """The calibration objective of ``setup`` (a calibration/setup.py ``CalibrationSetup``, which
    calls this as ``setup.build_objective``; docs/method.md §2), in micro-batches of at most
    ``token_budget`` padded tokens.

    ``samples``: data already read by ``setup.load_samples()`` or ``setup.load_heldout(n)`` (the CLI
    reads it before loading the model); otherwise the sample is read here. C4 packing
    (``setup.c4_packing``): ``exact``, every C4 sequence ``seq_len`` tokens (a short document
    continued by the next ones); ``truncate``, each document cut at ``seq_len`` tokens, as the
    committed calibration-size study was made.
    """
    setup.check_sizes()
    if token_budget < setup.seq_len:
        raise InputError(f"token_budget ({token_budget}) must be at least seq_len ({setup.seq_len})")
    if samples is None:
        samples = load_calibration_samples(setup)
    elif samples.calibration != setup.calibration:
        raise ValueError(f"calibration samples are for {samples.calibration!r}, not {setup.calibration!r}")
    if setup.spec.objective == "perplexity":
        reserve = samples.reserve if setup.packing == "exact" else None
        return perplexity_objective(samples.texts, tokenizer, setup.seq_len, token_budget, reserve=reserve)
    return tlm_objective(
        samples.items,
        samples.requests,
        tokenizer,
        setup.seq_len,
        token_budget,
        shared_context=setup.tlm_context == "shared",
        loss=setup.loss,
    )
