"""Training an encoder meter (paper E.6): completion cross-entropy + smooth-L1 on log(1 + TTG).

Every prefix h_0..h_T of a trajectory is one training sequence, read exactly as the meter reads
it at inference (the task segment and the last ``window`` action segments); the segments of a
trajectory are encoded once per batch and shared by its prefixes. Every prefix learns the
completion label b; prefixes of successful trajectories also regress log(1 + TTG_t). Each
trajectory weighs the same whatever its length. The targets (recorded outcomes, or the expert's
roll-out from each state) are :class:`RegressionConfig`'s ``targets``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..._optional import require
from ...meters.base import meter_history
from ...meters.encoder import EncoderMeter
from .datasets import Trajectory
from .sft import cosine_schedule

#: Scale of the sibling ranking loss, in log(1 + TTG): a pair ordered right by 0.2 (about a
#: fifth of the estimate) costs about 2% of a pair with no gap.
RANK_TEMPERATURE = 0.05


@dataclass(frozen=True)
class RegressionConfig:
    """Encoder-meter training hyperparameters.

    ``targets``: ``recorded`` is the paper's eq. 1-2, the trajectory's own
    outcome and TTG. ``expert`` takes each prefix's label from the expert's roll-out from that state
    (``Trajectory.expert_ttg``: b = the expert finishes within the turns left, v = its TTG): the
    recorded policy rolls in, the expert rolls out. A random walk's prefixes then say how far the
    state it reached is from the goal, instead of how much more random walking followed, and a step
    that changes nothing leaves the target unchanged, so the meter learns no reward for doing nothing.

    Each trajectory weighs the same whatever its length, in both losses: counting prefixes instead
    lets the long failed episodes of weak policies (a random policy runs to the 50-step limit)
    outnumber everything else, and the meter then predicts failure on every state.

    ``backbone_lr = 0`` freezes the backbone: segment embeddings are then computed once and only
    the GRU and head train (the fast path for a pretrained encoder such as MiniLM on a CPU).

    ``delta_weight`` adds a loss on the change between consecutive prefixes: the predicted
    log(1 + TTG) difference against the target's, wherever both prefixes have a TTG target.
    Guidance and DeltaTTG read only these changes, and one step moves log(1 + TTG) by a few tenths
    at most, which a loss on the levels alone barely notices (needs a meter without a window).

    Trajectories with ``siblings`` (:mod:`.siblings`, other actions tried from their states) add each
    sibling as one more prefix with its own target, and ``sibling_weight`` adds a loss on the
    difference between a sibling's predicted log(1 + TTG) and the trajectory's own next state's,
    against the targets' difference: the comparison a guide makes between candidates of one state
    (needs a meter without a window and ``targets="expert"``); a no-op or departure sibling is also
    paired with its state's ``best`` sibling (the planner's next command, gold's move) where there is one. ``sibling_rank_weight`` adds a
    logistic ranking loss on the same pairs, ``softplus(-sign(d) * (p_s - p_c) / RANK_TEMPERATURE)``
    for a target difference d != 0: the difference loss is satisfied by a small error on a small
    gap whatever its sign, while a guide only reads the sign.

    ``step_rank_weight`` adds the same logistic ranking loss on consecutive prefixes of each
    trajectory, wherever both have a TTG target and the targets differ: the sign of the step's
    predicted change, which is what step quality, guidance and a carried no-op (compared with the
    state before it) read (needs a meter without a window). With best siblings it also orders each
    best sibling against the state it was tried from: the planner's move, which a guide with a
    carried no-op weighs against standing still, from states the recorded policy left otherwise.

    A meter with a carry gate (``EncoderConfig.carry_gate``) also learns the gate by
    cross-entropy, weighted by ``gate_weight``: 1 where a prefix's TTG target equals the previous
    prefix's (the action left the remaining work as it was; a sibling always), 0 where it differs.
    """

    epochs: int = 6
    batch_size: int = 16
    lr: float = 1e-3
    backbone_lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.05
    huber_delta: float = 1.0
    max_grad_norm: float = 1.0
    seed: int = 0
    targets: str = "recorded"
    delta_weight: float = 0.0
    sibling_weight: float = 1.0
    sibling_rank_weight: float = 0.0
    step_rank_weight: float = 0.0
    gate_weight: float = 1.0


def trajectory_targets(trajectory: Trajectory, targets: str = "recorded") -> tuple[list[float], list[float]]:
    """Per prefix h_0..h_T: completion label b and log(1 + TTG) (NaN where b is 0).

    ``targets="recorded"``: the trajectory's outcome and recorded TTG (eq. 1-2); ``"expert"``:
    the expert roll-out's from each prefix (``trajectory.expert_ttg``).
    """
    if targets == "expert":
        if trajectory.expert_ttg is None:
            raise ValueError(f"{trajectory.id}: no expert_ttg recorded (record with plan_lengths=True) for targets='expert'")
        b = [float(v is not None) for v in trajectory.expert_ttg]
        return b, [math.nan if v is None else math.log1p(v) for v in trajectory.expert_ttg]
    if targets != "recorded":
        raise ValueError(f"targets must be 'recorded' or 'expert', got {targets!r}")
    n = trajectory.num_steps + 1
    b = [float(trajectory.success)] * n
    y = [math.log1p(v) for v in trajectory.ttg] if trajectory.ttg is not None else [math.nan] * n
    return b, y


def train_encoder_meter(
    meter: EncoderMeter,
    trajectories: Sequence[Trajectory],
    config: RegressionConfig = RegressionConfig(),
    progress: bool = True,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> list[float]:
    """Train ``meter`` in place on ``trajectories``; returns the loss of every optimizer step.

    ``on_step`` gets each step's ``loss`` and head ``lr`` (an experiment tracker's hook)."""
    torch = require("torch", "hf")
    from ...bars import progress_bar

    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    model = meter.model
    device = meter.device
    frozen = config.backbone_lr <= 0
    for p in model.backbone.parameters():
        p.requires_grad_(not frozen)
    if any(t.siblings for t in trajectories) and (config.targets != "expert" or meter.config.window is not None):
        raise ValueError("siblings need targets='expert' and a meter that reads the whole history (window None)")
    data = [_example(meter, traj, config.targets) for traj in trajectories]
    meter.clear_cache()
    if frozen:
        all_texts = list(dict.fromkeys(s for ex in data for s in ex.texts()))
        for start in progress_bar(range(0, len(all_texts), 1024), desc="encoder: embed segments", disable=not progress):
            meter.embed(all_texts[start : start + 1024])
    head_params = [p for n, p in model.named_parameters() if not n.startswith("backbone.")]
    groups = [{"params": head_params, "lr": config.lr}]
    if not frozen:
        groups.append({"params": list(model.backbone.parameters()), "lr": config.backbone_lr})
    opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    steps_per_epoch = max(1, math.ceil(len(data) / config.batch_size))
    total = steps_per_epoch * config.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, total, int(config.warmup_ratio * total)))
    losses = []
    model.train()
    with progress_bar(total=total, desc="encoder meter", disable=not progress) as bar:
        for _ in range(config.epochs):
            order = list(range(len(data)))
            rng.shuffle(order)
            for start in range(0, len(order), config.batch_size):
                batch = [data[i] for i in order[start : start + config.batch_size]]
                loss = _loss(meter, batch, frozen, config, torch, device)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], config.max_grad_norm)
                lr = float(opt.param_groups[0]["lr"])
                opt.step()
                sched.step()
                losses.append(loss.item())
                if on_step is not None:
                    on_step({"loss": losses[-1], "lr": lr})
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    meter.clear_cache()
    return losses


class _Example(NamedTuple):
    """One trajectory's training data: segments, per-prefix targets (one per segment: the opening's
    take h_0's), its siblings' ``(segment index of the state left from, segments, b, log1p TTG, kind,
    requests ahead after the sibling's move)``, and for a requests-aware meter the requests ahead of
    each segment."""

    segs: list
    b: list[float]
    y: list[float]
    siblings: list[tuple[int, list, float, float, str, int]]
    turn_limit: int | None = None
    ahead: list[int] | None = None

    def texts(self) -> list:
        """Every segment the example reads."""
        return [*self.segs, *(s for _, segs, *_ in self.siblings for s in segs)]


def _example(meter: EncoderMeter, traj: Trajectory, targets: str) -> _Example:
    """``traj``'s training data as the meter reads it, its siblings' rows included."""
    history = meter_history(meter, traj.messages, traj.task)
    segments = meter.segments(history)
    # Assistant messages of the env's opening (tau2's greeting) are segments before h_0: they
    # take h_0's targets (the meter is only asked from h_0 on).
    opening = len(segments) - (traj.num_steps + 1)
    if opening < 0:
        raise ValueError(f"{traj.id}: {len(segments)} segments for {traj.num_steps} actions")
    siblings = [_sibling_example(meter, s, traj.task, opening) for s in traj.siblings]
    b, y = trajectory_targets(traj, targets)
    ahead = meter.requests_ahead(history) if meter.config.requests_ahead else None
    return _Example(segments, b[:1] * opening + b, y[:1] * opening + y, siblings, traj.turn_limit, ahead)


def _sibling_example(meter: EncoderMeter, sibling: Any, task: Any = None, opening: int = 0) -> tuple[int, list, float, float, str, int]:
    """A sibling's training row (``task``: its trajectory's, for the note a requests-aware meter
    reads); ``opening``: segments of the env's opening before h_0 (tau2's greeting)."""
    history = meter_history(meter, sibling.messages, task)
    segments = meter.segments(history)
    at = opening + sibling.step
    if len(segments) != at + 2:
        raise ValueError(f"sibling from state {sibling.step}: {len(segments)} segments, expected {at + 2}")
    v = sibling.expert_ttg
    ahead = meter.requests_ahead(history)[-1] if meter.config.requests_ahead else 0
    return at, segments, float(v is not None), math.nan if v is None else math.log1p(v), getattr(sibling, "kind", "noop"), ahead


def _loss(meter: EncoderMeter, batch: list, frozen: bool, config: RegressionConfig, torch: Any, device: Any) -> Any:
    model = meter.model
    texts = list(dict.fromkeys(s for ex in batch for s in ex.texts()))
    if frozen:
        vectors = meter.embed(texts).clone()
    else:
        inputs = meter.tokenize(texts)
        vectors = model.embed(inputs["input_ids"], inputs["attention_mask"])
    index = {t: i for i, t in enumerate(texts)}
    pairs = gates = parents = None
    if meter.config.window is None:
        last, b, y, w, (out, states, gates) = _full_history_outputs(meter, batch, index, vectors, torch, device)
        if any(ex.siblings for ex in batch):
            sib_last, sib_b, sib_y, sib_w, pairs, sib_gates, parents = _sibling_outputs(
                meter, batch, index, vectors, states, out, torch, device
            )
            last, b, y, w = torch.cat([last, sib_last]), b + sib_b, y + sib_y, w + sib_w
            if gates is not None:
                gates = tuple(torch.cat([a, c]) for a, c in zip(gates, sib_gates))
    else:
        if config.delta_weight or config.step_rank_weight:
            raise ValueError("delta_weight and step_rank_weight need a meter that reads the whole history (window None)")
        last, b, y, w = _windowed_outputs(meter, batch, index, vectors, torch, device)
    b = torch.tensor(b, device=device)
    y = torch.tensor(y, device=device)
    w = torch.tensor(w, device=device)
    bce = (torch.nn.functional.binary_cross_entropy_with_logits(last[:, 0], b, reduction="none") * w).sum() / w.sum()
    has_y = ~torch.isnan(y)
    if has_y.any():
        reg = torch.nn.functional.smooth_l1_loss(last[:, 1][has_y], y[has_y], beta=config.huber_delta, reduction="none")
        reg = (reg * w[has_y]).sum() / w[has_y].sum()
    else:
        reg = last[:, 1].sum() * 0.0
    if config.delta_weight:
        reg = reg + config.delta_weight * _delta_loss(last[:, 1], y, [len(ex.segs) for ex in batch], torch)
    if config.step_rank_weight:
        reg = reg + config.step_rank_weight * _step_rank_loss(last[:, 1], y, [len(ex.segs) for ex in batch], torch)
        if parents is not None:
            reg = reg + config.step_rank_weight * _rank_loss(*parents, torch)
    if pairs is not None and config.sibling_weight:
        reg = reg + config.sibling_weight * _pair_loss(*pairs, torch)
    if pairs is not None and config.sibling_rank_weight:
        reg = reg + config.sibling_rank_weight * _rank_loss(*pairs, torch)
    if gates is not None and config.gate_weight:
        reg = reg + config.gate_weight * _gate_loss(*gates, torch)
    return bce + reg


def _gate_labels(y: Any, previous_y: Any, torch: Any) -> tuple[Any, Any]:
    """Carry-gate labels (1: the TTG target did not change) and where they are defined (both finite)."""
    known = ~torch.isnan(y) & ~torch.isnan(previous_y)
    return (y == previous_y).float(), known


def _gate_loss(logits: Any, labels: Any, known: Any, weights: Any, torch: Any) -> Any:
    """Cross-entropy of the carry gate where its label is defined, each trajectory weighing the same."""
    if not known.any():
        return logits.sum() * 0.0
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits[known], labels[known], reduction="none")
    return (loss * weights[known]).sum() / weights[known].sum()


def _pair_loss(sibling: Any, child: Any, sibling_y: Any, child_y: Any, torch: Any) -> Any:
    """Smooth-L1 between the predicted and target differences of log(1 + TTG), sibling minus the
    trajectory's own next state, wherever both have a TTG target."""
    target = sibling_y - child_y
    ok = ~torch.isnan(target)
    if not ok.any():
        return sibling.sum() * 0.0
    return torch.nn.functional.smooth_l1_loss((sibling - child)[ok], target[ok], beta=0.1)


def _rank_loss(sibling: Any, child: Any, sibling_y: Any, child_y: Any, torch: Any) -> Any:
    """Logistic ranking loss on the order of each pair, sibling against the trajectory's own next
    state, wherever their targets differ (a pair of equal targets has no order to learn)."""
    target = sibling_y - child_y
    ok = ~torch.isnan(target) & (target != 0)
    if not ok.any():
        return sibling.sum() * 0.0
    margin = torch.sign(target[ok]) * (sibling - child)[ok]
    return torch.nn.functional.softplus(-margin / RANK_TEMPERATURE).mean()


def _sibling_outputs(meter: EncoderMeter, batch: list, index: dict, vectors: Any, states: Any, out: Any, torch: Any, device: Any) -> tuple:
    """Head outputs after each sibling (one GRU step from the trajectory's state before it), its
    targets and weights, the pairs (sibling v, the trajectory's own next-state v, and their
    targets) for the pair loss, the carry gate's (logits, labels, known, weights) or None, and the
    pairs (best sibling v, v of the state it was tried from, their targets) for the step order
    loss, or None where the batch has no best sibling."""
    rows, cols, last_segment, b, y, w, child_y, ahead = [], [], [], [], [], [], [], []
    noops, bests = [], {}  # row of each no-op sibling and its state; row of each state's best sibling
    for i, ex in enumerate(batch):
        for t, segs, bs, ys, kind, left in ex.siblings:
            if kind == "best":
                bests[i, t] = len(rows)
            else:
                noops.append((len(rows), (i, t)))
            rows.append(i)
            cols.append(t)
            last_segment.append(index[segs[-1]])
            b.append(bs)
            y.append(ys)
            w.append(1.0 / len(ex.segs))
            child_y.append(ex.y[t + 1])
            ahead.append(left)
    rows_t = torch.tensor(rows, device=device)
    cols_t = torch.tensor(cols, device=device)
    turns_left = None
    if meter.budget_aware:
        limits = [ex.turn_limit or meter.turn_limit for ex in batch for _ in ex.siblings]
        turns_left = torch.tensor([limit - (t + 1) for limit, t in zip(limits, cols)], device=device)
    requests_ahead = torch.tensor(ahead, device=device) if meter.config.requests_ahead else None
    last, gate = meter.model.extend(
        states[rows_t, cols_t],
        vectors[torch.tensor(last_segment, device=device)],
        turns_left,
        out[rows_t, cols_t, 1],
        return_gate=True,
        requests_ahead=requests_ahead,
    )
    child = out[rows_t, cols_t + 1]
    y_t = torch.tensor(y, device=device)
    pairs = (last[:, 1], child[:, 1], y_t, torch.tensor(child_y, device=device))
    matched = [(row, bests[state]) for row, state in noops if state in bests]
    if matched:  # each no-op sibling against its state's best sibling, too
        a, c = (torch.tensor(side, device=device) for side in zip(*matched))
        pairs = tuple(torch.cat([p, q]) for p, q in zip(pairs, (last[a, 1], last[c, 1], y_t[a], y_t[c])))
    gates = parents = None
    if gate is not None or bests:
        parent_y = torch.tensor([ex.y[t] for ex in batch for t, *_ in ex.siblings], device=device)
    if gate is not None:
        gates = (gate, *_gate_labels(y_t, parent_y, torch), torch.tensor(w, device=device))
    if bests:  # the planner's move against the state it left: what a carried no-op is compared with
        best_rows = torch.tensor(sorted(bests.values()), device=device)
        parents = (last[best_rows, 1], out[rows_t[best_rows], cols_t[best_rows], 1], y_t[best_rows], parent_y[best_rows])
    return last, b, y, w, pairs, gates, parents


def _consecutive(lengths: list[int], device: Any, torch: Any) -> Any:
    """Row of each prefix that has a next one (rows are the prefixes, trajectory after trajectory)."""
    starts = [sum(lengths[:k]) for k in range(len(lengths))]
    return torch.tensor([s + t for s, n in zip(starts, lengths) for t in range(n - 1)], dtype=torch.long, device=device)


def _delta_loss(pred: Any, y: Any, lengths: list[int], torch: Any) -> Any:
    """Smooth-L1 between predicted and target changes of log(1 + TTG) over consecutive prefixes of
    each trajectory (rows of ``pred``/``y`` are the prefixes, trajectory after trajectory)."""
    first = _consecutive(lengths, pred.device, torch)
    target = y[first + 1] - y[first]
    ok = ~torch.isnan(target)
    if not ok.any():  # also when no trajectory has two prefixes
        return pred.sum() * 0.0
    change = pred[first + 1] - pred[first]
    return torch.nn.functional.smooth_l1_loss(change[ok], target[ok], beta=0.1)


def _step_rank_loss(pred: Any, y: Any, lengths: list[int], torch: Any) -> Any:
    """:func:`_rank_loss` of each prefix's successor against it, over consecutive prefixes (rows as in :func:`_delta_loss`)."""
    first = _consecutive(lengths, pred.device, torch)
    return _rank_loss(pred[first + 1], pred[first], y[first + 1], y[first], torch)


def _full_history_outputs(meter: EncoderMeter, batch: list, index: dict, vectors: Any, torch: Any, device: Any) -> tuple:
    """Head outputs of every prefix from one GRU pass per trajectory (the GRU is causal, so its
    state after segment t is the prefix h_t's), with targets and weights, and the padded outputs,
    GRU states and the carry gate's (logits, labels, known, weights) or None."""
    lengths = torch.tensor([len(ex.segs) for ex in batch])
    padded = torch.zeros((len(batch), int(lengths.max())), dtype=torch.long, device=device)
    for i, ex in enumerate(batch):
        padded[i, : len(ex.segs)] = torch.tensor([index[s] for s in ex.segs], device=device)
    lengths_list = lengths.tolist()
    out, states, gate = meter.model(
        vectors[padded],
        lengths,
        meter.turns_left([n - 1 for n in lengths_list], lengths_list, [ex.turn_limit for ex in batch]),
        return_states=True,
        requests_ahead=_padded_ahead(meter, [ex.ahead for ex in batch], device),
    )
    rows = torch.cat([torch.full((n,), i, dtype=torch.long) for i, n in enumerate(lengths_list)]).to(device)
    cols = torch.cat([torch.arange(n) for n in lengths_list]).to(device)
    b = [v for ex in batch for v in ex.b]
    y = [v for ex in batch for v in ex.y]
    w = [1.0 / n for n in lengths_list for _ in range(n)]
    gates = None
    if gate is not None:
        # The first prefix has no previous one: its label is undefined (NaN previous target).
        previous = torch.tensor([math.nan if t == 0 else ex.y[t - 1] for ex in batch for t in range(len(ex.segs))], device=device)
        gates = (gate[rows, cols], *_gate_labels(torch.tensor(y, device=device), previous, torch), torch.tensor(w, device=device))
    return out[rows, cols], b, y, w, (out, states, gates)


def _padded_ahead(meter: EncoderMeter, aheads: list, device: Any) -> Any:
    """``[B, S]`` requests ahead of a batch's rows on ``device`` (None for a meter that reads none)."""
    found = meter.padded_ahead(aheads)
    return None if found is None else found.to(device)


def _windowed_outputs(meter: EncoderMeter, batch: list, index: dict, vectors: Any, torch: Any, device: Any) -> tuple:
    """Head outputs of every prefix read through the meter's window (one GRU pass per prefix)."""
    rows, steps, limits, aheads, b, y, w = [], [], [], [], [], [], []
    for ex in batch:
        segs = ex.segs
        for t in range(len(segs)):
            rows.append([index[s] for s in meter.window(segs[: t + 1])])
            steps.append(t)
            limits.append(ex.turn_limit)
            aheads.append(meter.window(ex.ahead[: t + 1]) if ex.ahead is not None else None)
            b.append(ex.b[t])
            y.append(ex.y[t])
            w.append(1.0 / len(segs))
    lengths = torch.tensor([len(r) for r in rows])
    padded = torch.zeros((len(rows), int(lengths.max())), dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        padded[i, : len(r)] = torch.tensor(r, device=device)
    out = meter.model(
        vectors[padded], lengths, meter.turns_left(steps, lengths.tolist(), limits), requests_ahead=_padded_ahead(meter, aheads, device)
    )
    return out[torch.arange(len(rows), device=device), lengths.to(device) - 1], b, y, w
