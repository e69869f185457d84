"""DeltaTTG credit assignment and the baseline advantage estimators, as pure array code.

Equations refer to the DeltaTTG paper ("Training Multi-Turn Agents with a Token-to-Go Progress
Meter", 2026): section 3.2 (eqs 7-11), appendix D.3 (eq. 14), D.4 (the bounded operator B_M),
D.6 (Algorithm 1), E.4 (ablations) and appendix B (baselines). No environment or model is involved.

A trajectory has T >= 1 actions; ``can_complete[t]`` and ``remaining[t]`` are the meter's outputs
for the history h_t before action t (``remaining`` None or NaN where ``can_complete`` is False);
``step_costs`` returns T+1 values (c_T anchored by the outcome) and ``Delta = c[:-1] - c[1:]`` has T
(eq. 8); ``n_tokens[t]`` counts action t's trainable tokens. Per-trajectory functions take and
return NumPy arrays; the ``batched_*`` ones import torch lazily and work on a rollout batch of B
trajectories, laid out as :func:`batched_token_advantages` says.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import torch

__all__ = [
    "CAP",
    "RHO",
    "Signal",
    "batched_gigpo",
    "batched_grpo",
    "batched_group_advantages",
    "batched_hgpo",
    "batched_token_advantages",
    "bounded_token_weights",
    "dapo_accumulate",
    "dapo_filter",
    "encode_keys",
    "gigpo",
    "grpo",
    "group_advantages",
    "hgpo",
    "step_costs",
    "step_weights",
]

Signal = Literal["ttg", "value", "logit", "feasibility"]
_SIGNALS = get_args(Signal)

#: DeltaTTG's mixing ratio rho (eq. 10) and multiplier cap M (eq. 11): table 4's values for every env.
RHO = 0.2
CAP = 5.0


# ----------------------------------------------------------------------------------------------
# DeltaTTG, one trajectory at a time
# ----------------------------------------------------------------------------------------------


def group_advantages(rewards: ArrayLike, num_steps: ArrayLike, eps: float = 1e-6) -> np.ndarray:
    """Group-relative advantages A_i from step-expanded statistics (appendix D.3, eq. 14).

    ``rewards`` and ``num_steps`` describe the G trajectories of one prompt group. Trajectory i
    contributes T_i rows carrying R_i; the mean and the sample standard deviation (ddof=1) are
    taken over the K = sum_i T_i rows, and A_i = (R_i - mu) / (sigma + eps). A group with a
    single row has no spread and gets advantage 0.
    """
    r = np.asarray(rewards, dtype=float)
    t = np.asarray(num_steps, dtype=float)
    k = t.sum()
    mu = (t * r).sum() / max(k, 1.0)
    sigma = np.sqrt((t * (r - mu) ** 2).sum() / max(k - 1.0, 1.0))
    return (r - mu) / (sigma + eps)


def step_costs(
    can_complete: ArrayLike | None,
    remaining: ArrayLike | None,
    success: bool,
    failure_cost: float,
    *,
    signal: Signal = "ttg",
    score: ArrayLike | None = None,
    final_score: float | None = None,
    logit_clip: float = 10.0,
) -> np.ndarray:
    """Costs c_0..c_T of one trajectory, terminal anchor included (eq. 7); Delta = c[:-1] - c[1:].

    ``signal="ttg"`` (eq. 7): c_t = remaining[t] if can_complete[t] else C, and c_T = 0 on
    success, C on failure or truncation. The ablations of appendix E.4 use another progress
    potential; each is written here as a cost whose difference c_t - c_{t+1} is their Delta:

    - ``"feasibility"`` (eq. 20): c_t = 0 if can_complete[t] else C, with the same anchor;
    - ``"value"``: c_t = -score[t], score = S(h_t) the outcome meter's final-score estimate, and
      c_T = -final_score, the observed final score (default 1.0 on success, else 0.0), so
      Delta = S(h_{t+1}) - S(h_t);
    - ``"logit"`` (eq. 19): c_t = -clip(score[t], -L, L), score = z_t = l+ - l-, and c_T = -L on
      success, +L on failure (L = ``logit_clip`` = 10).

    Raises ValueError when an estimate the signal needs is missing (None or NaN).

    >>> step_costs([True, False], [300, None], success=True, failure_cost=16384).tolist()
    [300.0, 16384.0, 0.0]
    """
    if signal not in _SIGNALS:
        raise ValueError(f"unknown signal {signal!r}; expected one of {_SIGNALS}")
    if signal in ("ttg", "feasibility"):
        if can_complete is None:
            raise ValueError(f"signal {signal!r} needs can_complete")
        can = np.asarray(can_complete, dtype=bool)
        if signal == "feasibility":
            estimate = np.zeros(can.shape)
        elif remaining is None:
            estimate = np.full(can.shape, np.nan)
        else:
            estimate = np.asarray(remaining, dtype=float).reshape(can.shape)
        costs = np.where(can, estimate, failure_cost)
        end = 0.0 if success else failure_cost
    elif signal == "value":
        costs = -np.asarray(score, dtype=float)
        end = -(float(success) if final_score is None else final_score)
    else:
        costs = -np.clip(np.asarray(score, dtype=float), -logit_clip, logit_clip)
        end = -logit_clip if success else logit_clip
    if np.isnan(costs).any():
        raise ValueError(f"a meter estimate that signal {signal!r} needs is missing")
    return np.append(costs, end)


def bounded_token_weights(q: ArrayLike, n_tokens: ArrayLike, cap: float) -> np.ndarray:
    """The bounded token-credit operator B_M of eq. 11 (appendix D.4), M = ``cap`` >= 1.

    Broadcasting q_t to the n_t tokens of step t and normalising to unit token mean gives
    w0_t = N q_t / sum_s n_s q_s with N = sum_s n_s. Tokens above M are set to M and the removed
    excess E goes to the tokens below M in proportion to their remaining capacity M - w0.

    One pass is exact, so no iteration is needed: with R = sum_{w0 < M} n (M - w0) the capacity
    left below the cap, R - E = N (M - 1) >= 0, so every gap M - w0 shrinks by the same factor
    1 - E/R in [0, 1]; no token is pushed past M and sum_t n_t w_t = N still holds.

    Steps with n_t = 0 carry no tokens: they do not enter N, E or R, and get the value the same
    formula gives a token of theirs (within [0, M]). When no step has tokens, or all of q sits on
    token-free steps, the weights are all ones.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    q = np.asarray(q, dtype=float)
    n = np.asarray(n_tokens, dtype=float)
    total = n.sum()
    mass = (n * q).sum()
    if total <= 0 or mass <= 0:
        return np.ones_like(q)
    w = total * q / mass
    excess = (n * np.maximum(w - cap, 0.0)).sum()
    room = (n * np.maximum(cap - w, 0.0)).sum()
    shrink = 1.0 - min(excess / room if room > 0 else 0.0, 1.0)
    return np.where(w >= cap, cap, cap - (cap - w) * shrink)


def step_weights(
    advantage: float,
    can_complete: ArrayLike | None,
    remaining: ArrayLike | None,
    success: bool,
    n_tokens: ArrayLike,
    failure_cost: float,
    rho: float = RHO,
    cap: float = CAP,
    *,
    signal: Signal = "ttg",
    positive_only: bool = False,
    score: ArrayLike | None = None,
    final_score: float | None = None,
    logit_clip: float = 10.0,
) -> np.ndarray:
    """Per-step multipliers w_t of one trajectory (eqs 8-11) with the fallbacks of Algorithm 1.

    Delta_t = c_t - c_{t+1} (eq. 8) from ``step_costs`` (``signal``, ``score``, ``final_score``
    and ``logit_clip`` select the E.4 variants there). Mass (eq. 9): m_t = max(sign(A) Delta_t, 0),
    or max(Delta_t, 0) with ``positive_only`` (eq. 21). Mixing (eq. 10): q_t = rho/T + (1 - rho)
    m_t / sum_s m_s, uniform 1/T when sum_s m_s = 0 (``rho=0`` is eq. 22). w = B_M(q; n)
    (eq. 11); every token of action t then gets the advantage A * w_t.

    Fallbacks (Algorithm 1 lines 13-16, footnote 2) return all ones, i.e. the original
    advantages: A == 0, or no state h_0..h_{T-1} predicted completable. ``can_complete=None``
    (the value meter has no completion label) skips the second check. The group rule (any invalid
    meter output keeps the whole group's advantages) lives in ``batched_token_advantages``.
    """
    n = np.asarray(n_tokens, dtype=float)
    steps = len(n)
    if advantage == 0 or (can_complete is not None and not np.any(can_complete)):
        return np.ones(steps)
    costs = step_costs(
        can_complete,
        remaining,
        success,
        failure_cost,
        signal=signal,
        score=score,
        final_score=final_score,
        logit_clip=logit_clip,
    )
    if len(costs) != steps + 1:
        raise ValueError(f"{len(costs) - 1} meter estimates for {steps} steps")
    delta = costs[:-1] - costs[1:]
    sign = 1.0 if positive_only or advantage > 0 else -1.0
    mass = np.maximum(sign * delta, 0.0)
    total = mass.sum()
    q = rho / steps + (1 - rho) * mass / total if total > 0 else np.full(steps, 1.0 / steps)
    return bounded_token_weights(q, n, cap)


# ----------------------------------------------------------------------------------------------
# Baselines (appendix B), one prompt group at a time
# ----------------------------------------------------------------------------------------------


def grpo(rewards: ArrayLike, num_steps: ArrayLike, eps: float = 1e-6) -> list[np.ndarray]:
    """GRPO (appendix B): every step of trajectory i gets its group advantage A_i (eq. 14).

    The statistics are the step-expanded ones of appendix D.3, which the paper's verl-agent
    pipeline uses for the trajectory-level advantage of every method.
    """
    advantages = group_advantages(rewards, num_steps, eps)
    return [np.full(int(t), a) for a, t in zip(advantages, np.asarray(num_steps), strict=False)]


def gigpo(
    rewards: ArrayLike,
    state_keys: Sequence[Sequence[Hashable]],
    gamma: float = 0.95,
    step_weight: float = 1.0,
    eps: float = 1e-6,
) -> list[np.ndarray]:
    """GiGPO (Feng et al.; appendix B): A^E_i + step_weight * A^S_{i,t}, per step.

    ``state_keys[i][t]`` identifies the state h_t of trajectory i (the env's ``state_key``; for
    similarity matching, pass keys that are equal for similar states). A^E is the episode-level
    advantage of eq. 14 (GiGPO's default step-expanded normalisation). A^S normalises the
    discounted return G_{i,t} = gamma^(T_i - 1 - t) R_i (the reward arrives at the last step) by
    the mean and sample standard deviation over the step group: all steps of this prompt group
    with an equal key, from any trajectory or repeated visits within one. A step alone in its
    step group gets A^S = 0. Defaults follow table 4: gamma 0.95, step weight 1, mean/std norm.
    """
    lengths = [len(keys) for keys in state_keys]
    episode = group_advantages(rewards, lengths, eps)
    returns = _discounted_returns(rewards, lengths, gamma)
    step, _ = _normalize_within(returns, _codes([k for keys in state_keys for k in keys]), eps)
    return _split(np.repeat(episode, lengths) + step_weight * step, lengths)


def hgpo(
    rewards: ArrayLike,
    state_keys: Sequence[Sequence[Hashable]],
    context: int = 2,
    gamma: float = 0.95,
    alpha: float = 1.0,
    step_weight: float = 1.0,
    eps: float = 1e-6,
) -> list[np.ndarray]:
    """HGPO (He et al.; appendix B): A^E_i + step_weight * A^H_{i,t}, per step.

    Hierarchy of groups: for k = 0..``context``, the level-k group of step t holds the steps of
    this prompt group whose k-step context (their own key and the k previous keys of their
    trajectory) equals that of t; a step with fewer than k predecessors uses its whole history,
    so it matches only steps at the same depth with the same history. Levels nest: each
    level-k group lies inside a level-(k-1) group. In each level group of two or more steps,
    A_k = (G - mean) / (std + eps) of the discounted returns G_{i,t} = gamma^(T_i - 1 - t) R_i
    (sample std);
    A^H = sum_k (k+1)^alpha A_k / sum_k (k+1)^alpha over the levels where the step has company
    (history-length weighting, weight_type=length, exponent 1), and 0 where it has none.
    A^E is the episode-level advantage of eq. 14, as in GiGPO.

    Where the DeltaTTG paper is silent: base_group=False is read as "no extra level holding every
    step of the prompt group" (trajectory-level credit enters only through A^E); ``context=2``
    follows the history length 2 of the paper's ALFWorld runs (appendix E.5) and verl-agent.
    """
    lengths = [len(keys) for keys in state_keys]
    episode = group_advantages(rewards, lengths, eps)
    returns = _discounted_returns(rewards, lengths, gamma)
    weighted = np.zeros(len(returns))
    weight_sum = np.zeros(len(returns))
    for k in range(context + 1):
        contexts = [tuple(keys[max(0, t - k) : t + 1]) for keys in state_keys for t in range(len(keys))]
        level, size = _normalize_within(returns, _codes(contexts), eps)
        weight = np.where(size > 1, (k + 1.0) ** alpha, 0.0)
        weighted += weight * level
        weight_sum += weight
    step = np.divide(weighted, weight_sum, out=np.zeros_like(weighted), where=weight_sum > 0)
    return _split(np.repeat(episode, lengths) + step_weight * step, lengths)


def dapo_filter(rewards: ArrayLike, group_ids: ArrayLike, min_std: float = 1e-4) -> np.ndarray:
    """DAPO's dynamic-sampling filter (appendix B): a keep mask over trajectories.

    A group whose rewards have standard deviation below ``min_std`` (1e-4, table 4) is dropped;
    all its outcomes agree, so its group advantages would be 0. The standard deviation is the
    population one, as in DAPO's verl trainer. Kept trajectories then get GRPO advantages.
    """
    r = np.asarray(rewards, dtype=float)
    codes = _codes(np.asarray(group_ids).tolist())
    count = np.bincount(codes)
    mean = np.bincount(codes, r) / count
    std = np.sqrt(np.bincount(codes, (r - mean[codes]) ** 2) / count)
    return (std >= min_std)[codes]


def dapo_accumulate(
    batches: Iterable[tuple[ArrayLike, ArrayLike]],
    target_groups: int,
    max_batches: int = 10,
    min_std: float = 1e-4,
) -> list[np.ndarray]:
    """DAPO's dynamic sampling (appendix B, table 4): gather kept groups over generation batches.

    The generation loop itself lives in the trainer: ``batches`` yields, lazily, one
    ``(rewards, group_ids)`` pair per generated batch. At most ``max_batches`` (10) are consumed,
    stopping as soon as ``target_groups`` groups passed ``dapo_filter``. Returns one keep mask per
    consumed batch; groups beyond the target in the last batch are dropped (first-seen order),
    as verl's DAPO trainer truncates the accepted batch. If the total stays short of the target
    after ``max_batches``, the masks hold what was found and the trainer decides (verl raises).
    """
    masks: list[np.ndarray] = []
    kept = 0
    for rewards, group_ids in batches:
        ids = np.asarray(group_ids)
        mask = dapo_filter(rewards, ids, min_std)
        groups = _codes(ids.tolist())
        ordered = list(dict.fromkeys(groups[mask].tolist()))
        mask &= np.isin(groups, ordered[: target_groups - kept])
        kept += min(len(ordered), target_groups - kept)
        masks.append(mask)
        if kept >= target_groups or len(masks) >= max_batches:
            break
    return masks


# ----------------------------------------------------------------------------------------------
# Batched forms (torch)
# ----------------------------------------------------------------------------------------------


def encode_keys(state_keys: Sequence[Sequence[Hashable]], t_max: int | None = None) -> np.ndarray:
    """Integer codes ``[B, T_max]`` for per-step state keys (any hashables), -1 on padding.

    Equal keys get equal codes across the whole batch (an exact codebook, no hashing), ready
    for ``batched_gigpo`` and ``batched_hgpo``.
    """
    width = max((len(keys) for keys in state_keys), default=0) if t_max is None else t_max
    flat = _codes([k for keys in state_keys for k in keys])
    out = np.full((len(state_keys), width), -1, dtype=np.int64)
    start = 0
    for row, keys in enumerate(state_keys):
        out[row, : len(keys)] = flat[start : start + len(keys)]
        start += len(keys)
    return out


def batched_group_advantages(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``group_advantages`` (appendix D.3, eq. 14) for every group of a batch at once: ``[B]``."""
    import torch

    r = torch.as_tensor(rewards, dtype=dtype or torch.float32)
    codes = torch.unique(torch.as_tensor(group_ids, device=r.device), return_inverse=True)[1]
    rows = torch.as_tensor(num_steps, device=r.device).to(r.dtype)
    return _scatter_normalize(r, codes, rows, eps)[0]


def batched_grpo(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    token_step: ArrayLike | torch.Tensor | None = None,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``grpo`` for a whole batch: step-level ``[B, T_max]`` or, with ``token_step``, ``[B, L]``.

    T_max is ``max(num_steps)``.
    """
    import torch

    advantages = batched_group_advantages(rewards, group_ids, num_steps, eps, dtype)
    lengths = torch.as_tensor(num_steps, device=advantages.device)
    mask = _step_mask(lengths, int(lengths.max()))
    return _to_tokens(advantages[:, None] * mask, token_step)


def batched_gigpo(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    state_keys: ArrayLike | torch.Tensor,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    token_step: ArrayLike | torch.Tensor | None = None,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``gigpo`` for a whole batch; ``state_keys`` ``[B, T_max]`` integer codes (``encode_keys``).

    Returns step-level ``[B, T_max]`` or, with ``token_step``, token-level ``[B, L]`` advantages.
    """
    import torch

    episode, keys, (b, t, returns, groups) = _keyed_steps(rewards, group_ids, num_steps, state_keys, gamma, eps, dtype)
    step, _ = _scatter_normalize(returns, _row_codes(groups, keys[b, t]), torch.ones_like(returns), eps)
    return _episode_plus_step(episode, keys, b, t, step_weight * step, token_step)


def batched_hgpo(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    state_keys: ArrayLike | torch.Tensor,
    context: int = 2,
    gamma: float = 0.95,
    alpha: float = 1.0,
    step_weight: float = 1.0,
    token_step: ArrayLike | torch.Tensor | None = None,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``hgpo`` for a whole batch, in :func:`batched_gigpo`'s layout (``state_keys`` from ``encode_keys``)."""
    import torch

    episode, keys, (b, t, returns, groups) = _keyed_steps(rewards, group_ids, num_steps, state_keys, gamma, eps, dtype)
    weighted = torch.zeros_like(returns)
    weight_sum = torch.zeros_like(returns)
    for k in range(context + 1):
        # The context of step t is (depth, key_t, ..., key_{t-k}); positions before the start
        # read as 0 and the depth min(t, k) keeps them apart from real keys.
        back = [torch.where(t >= j, keys[b, (t - j).clamp(min=0)], 0) for j in range(k + 1)]
        level, size = _scatter_normalize(returns, _row_codes(groups, t.clamp(max=k), *back), torch.ones_like(returns), eps)
        weight = (size > 1).to(returns.dtype) * (k + 1.0) ** alpha
        weighted += weight * level
        weight_sum += weight
    step = weighted / torch.where(weight_sum > 0, weight_sum, 1.0)
    return _episode_plus_step(episode, keys, b, t, step_weight * step, token_step)


def _keyed_steps(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    state_keys: ArrayLike | torch.Tensor,
    gamma: float,
    eps: float,
    dtype: torch.dtype | None,
) -> tuple:
    """The episode advantages (eq. 14), the keys as a tensor, and :func:`_step_rows` of the batch."""
    import torch

    episode = batched_group_advantages(rewards, group_ids, num_steps, eps, dtype)
    keys = torch.as_tensor(state_keys, device=episode.device)
    return episode, keys, _step_rows(episode, rewards, group_ids, num_steps, keys.shape[1], gamma)


def _episode_plus_step(
    episode: torch.Tensor,
    keys: torch.Tensor,
    b: torch.Tensor,
    t: torch.Tensor,
    step: torch.Tensor,
    token_step: ArrayLike | torch.Tensor | None,
) -> torch.Tensor:
    """A^E_b + the step term at each real ``[b, t]`` (0 on padding), per token with ``token_step``."""
    import torch

    out = torch.zeros(keys.shape, dtype=episode.dtype, device=episode.device)
    out[b, t] = episode[b] + step
    return _to_tokens(out, token_step)


def batched_token_advantages(
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    can_complete: ArrayLike | torch.Tensor | None,
    remaining: ArrayLike | torch.Tensor | None,
    success: ArrayLike | torch.Tensor,
    n_tokens: ArrayLike | torch.Tensor,
    failure_cost: float,
    rho: float = RHO,
    cap: float = CAP,
    *,
    valid: ArrayLike | torch.Tensor | None = None,
    signal: Signal = "ttg",
    positive_only: bool = False,
    score: ArrayLike | torch.Tensor | None = None,
    final_score: ArrayLike | torch.Tensor | None = None,
    logit_clip: float = 10.0,
    token_step: ArrayLike | torch.Tensor | None = None,
    costs: ArrayLike | torch.Tensor | None = None,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """DeltaTTG advantages A_i w_{i,t} (eq. 11) for a whole rollout batch (Algorithm 1 lines 5-32).

    Vectorised over the batch, no Python loop over trajectories or steps: the group advantages
    of eq. 14 (``rewards`` ``[B]``, ``group_ids`` ``[B]``, ``num_steps`` ``[B]``), then the costs,
    deltas, mass, mixing and B_M of ``step_weights`` on ``[B, T_max]`` tensors (``can_complete``,
    ``remaining`` with NaN where unknown, ``n_tokens``, ``score``; ``success`` and
    ``final_score`` are ``[B]``). The same options select the ablations of appendix E.4.

    Fallbacks keep A_i on every token: A_i == 0; no completable state (when ``can_complete`` is
    given); and Algorithm 1's group rule: ``valid`` (``[B]``, or ``[B, T_max]`` per state) marks
    meter outputs that parsed, and a prompt group with an invalid output on any trajectory that
    was queried (A_i != 0) keeps all its original advantages. Predictions of trajectories that
    end up keeping A_i are never read, so they may hold anything.

    ``costs`` (``[B, T_max + 1]``, c_0..c_T with the terminal anchor at index ``num_steps[b]``) are
    costs already computed (ProgressMeterWrapper's recorded ``ttg_cost``, eq. 7): the signal is then
    read from them, so ``remaining`` and ``failure_cost`` are not used.

    The batch layout (every ``batched_*`` function's):

    - step axis ``[B, T_max]``: step t of trajectory b sits at ``[b, t]`` and is real where
      ``t < num_steps[b]``; padding entries are ignored;
    - ``group_ids``: ``[B]`` integer prompt-group id of each trajectory (map string uids with
      ``np.unique(uids, return_inverse=True)[1]``); ``state_keys``: ``[B, T_max]`` integer codes,
      see ``encode_keys``;
    - output without ``token_step``: step-level advantages ``[B, T_max]`` (0 on padding). Every
      trainable token of action t gets ``out[b, t]``; a trainer with one training row per step (the
      verl-agent layout) multiplies it with that row's response mask. With ``token_step`` (``[B, L]``,
      the action index of each response token, -1 or any negative value for tokens that are not
      trained, such as observations and padding) the output is token-level ``[B, L]``, 0 on the
      untrained tokens.

    ``dtype`` defaults to float32.
    """
    import torch

    if signal not in _SIGNALS:
        raise ValueError(f"unknown signal {signal!r}; expected one of {_SIGNALS}")
    advantages = batched_group_advantages(rewards, group_ids, num_steps, eps, dtype)
    ft, dev = advantages.dtype, advantages.device
    n = torch.as_tensor(n_tokens, device=dev)
    lengths = torch.as_tensor(num_steps, device=dev)
    mask = _step_mask(lengths, n.shape[1])
    won = torch.as_tensor(success, device=dev).bool()

    keep = advantages == 0
    if valid is not None:
        ok = torch.as_tensor(valid, device=dev).bool()
        if ok.dim() == 2:
            ok = (ok | ~mask).all(dim=1)
        codes = torch.unique(torch.as_tensor(group_ids, device=dev), return_inverse=True)[1]
        bad = torch.zeros(int(codes.max()) + 1, dtype=ft, device=dev)
        bad.index_add_(0, codes, (~ok & ~keep).to(ft))
        keep |= bad[codes] > 0
    if can_complete is not None:
        can = torch.as_tensor(can_complete, device=dev).bool()
        keep |= ~(can & mask).any(dim=1)

    # Costs c_0..c_{T_max} with c at index num_steps[b] the terminal anchor (eq. 7, E.4).
    lost = (~won).to(ft)
    anchored = costs is not None
    if anchored:
        costs = torch.as_tensor(costs, dtype=ft, device=dev)
        if costs.shape != (len(n), n.shape[1] + 1):
            raise ValueError(f"costs must be [B, T_max + 1] = {[len(n), n.shape[1] + 1]}, got {list(costs.shape)}")
    elif signal in ("ttg", "feasibility"):
        if can_complete is None:
            raise ValueError(f"signal {signal!r} needs can_complete")
        if signal == "feasibility" or remaining is None:
            fill = 0.0 if signal == "feasibility" else float("nan")
            estimate = torch.full(can.shape, fill, dtype=ft, device=dev)
        else:
            estimate = torch.as_tensor(remaining, dtype=ft, device=dev)
        costs = torch.where(can, estimate, torch.tensor(failure_cost, dtype=ft, device=dev))
        end = lost * failure_cost
    elif signal == "value":
        costs = -torch.as_tensor(score, dtype=ft, device=dev)
        end = -(1.0 - lost if final_score is None else torch.as_tensor(final_score, dtype=ft, device=dev))
    else:
        costs = -torch.as_tensor(score, dtype=ft, device=dev).clamp(-logit_clip, logit_clip)
        end = (2.0 * lost - 1.0) * logit_clip
    if (torch.isnan(costs[:, : n.shape[1]]) & mask & ~keep[:, None]).any():
        raise ValueError(f"a meter estimate that signal {signal!r} needs is missing")
    if not anchored:
        costs = torch.cat([costs, costs.new_zeros(len(costs), 1)], dim=1)
        costs.scatter_(1, lengths[:, None].long(), end[:, None])
    delta = costs[:, :-1] - costs[:, 1:]

    sign = 1.0 if positive_only else torch.where(advantages > 0, 1.0, -1.0).to(ft)[:, None]
    mass = torch.where(mask, (sign * delta).clamp(min=0.0), 0.0)
    total = mass.sum(dim=1, keepdim=True)
    steps = lengths.clamp(min=1).to(ft)[:, None]
    mixed = rho / steps + (1 - rho) * mass / torch.where(total > 0, total, 1.0)
    share = torch.where(total > 0, mixed, 1 / steps)
    w = _batched_bound(torch.where(mask, share, 0.0), torch.where(mask, n, 0).to(ft), cap)
    w = torch.where(keep[:, None], 1.0, w)
    return _to_tokens(torch.where(mask, advantages[:, None] * w, 0.0), token_step)


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _codes(keys: Sequence[Hashable]) -> np.ndarray:
    """Dense integer codes 0..G-1 for hashable keys, in first-seen order."""
    index: dict[Hashable, int] = {}
    return np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)


def _normalize_within(values: np.ndarray, codes: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(v - group mean) / (group sample std + eps) and the group size, per item."""
    count = np.bincount(codes).astype(float)
    mean = np.bincount(codes, values) / count
    dev = values - mean[codes]
    std = np.sqrt(np.bincount(codes, dev**2) / np.maximum(count - 1, 1))
    return dev / (std[codes] + eps), count[codes]


def _discounted_returns(rewards: ArrayLike, lengths: Sequence[int], gamma: float) -> np.ndarray:
    """G_{i,t} = gamma^(T_i - 1 - t) R_i, flattened over the trajectories."""
    return np.concatenate([r * gamma ** np.arange(t - 1, -1, -1.0) for r, t in zip(np.asarray(rewards, float), lengths, strict=False)])


def _split(flat: np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1])


def _step_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    import torch

    return torch.arange(width, device=lengths.device) < lengths[:, None]


def _scatter_normalize(values: torch.Tensor, codes: torch.Tensor, weights: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted ``_normalize_within``: each item counts ``weights`` rows of its group."""
    import torch

    groups = int(codes.max()) + 1 if len(codes) else 0
    count = torch.zeros(groups, dtype=values.dtype, device=values.device).index_add_(0, codes, weights)
    total = torch.zeros_like(count).index_add_(0, codes, weights * values)
    dev = values - (total / count.clamp(min=1))[codes]
    square = torch.zeros_like(count).index_add_(0, codes, weights * dev**2)
    std = (square / (count - 1).clamp(min=1)).sqrt()
    return dev / (std[codes] + eps), count[codes]


def _row_codes(*columns: torch.Tensor) -> torch.Tensor:
    """Dense codes for the distinct rows of the stacked integer columns."""
    import torch

    return torch.unique(torch.stack([c.long() for c in columns], dim=1), dim=0, return_inverse=True)[1]


def _step_rows(
    episode: torch.Tensor,
    rewards: ArrayLike | torch.Tensor,
    group_ids: ArrayLike | torch.Tensor,
    num_steps: ArrayLike | torch.Tensor,
    width: int,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Real steps as rows: trajectory b, step t, discounted return, group id."""
    import torch

    dev = episode.device
    lengths = torch.as_tensor(num_steps, device=dev)
    b, t = _step_mask(lengths, width).nonzero(as_tuple=True)
    r = torch.as_tensor(rewards, dtype=episode.dtype, device=dev)
    returns = r[b] * gamma ** (lengths[b] - 1 - t).to(episode.dtype)
    return b, t, returns, torch.as_tensor(group_ids, device=dev)[b]


def _batched_bound(q: torch.Tensor, n: torch.Tensor, cap: float) -> torch.Tensor:
    """``bounded_token_weights`` on each row of ``[B, T_max]`` tensors."""
    import torch

    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    total = n.sum(dim=1, keepdim=True)
    mass = (n * q).sum(dim=1, keepdim=True)
    ok = (total > 0) & (mass > 0)
    w = total * q / torch.where(ok, mass, 1.0)
    excess = (n * (w - cap).clamp(min=0.0)).sum(dim=1, keepdim=True)
    room = (n * (cap - w).clamp(min=0.0)).sum(dim=1, keepdim=True)
    shrink = 1.0 - torch.where(room > 0, excess / torch.where(room > 0, room, 1.0), 0.0).clamp(max=1.0)
    w = torch.where(w >= cap, cap, cap - (cap - w) * shrink)
    return torch.where(ok, w, 1.0)


def _to_tokens(step_values: torch.Tensor, token_step: ArrayLike | torch.Tensor | None) -> torch.Tensor:
    """Step values ``[B, T_max]``, or gathered to tokens ``[B, L]`` when ``token_step`` is given."""
    import torch

    if token_step is None:
        return step_values
    padded = torch.cat([step_values, step_values.new_zeros(len(step_values), 1)], dim=1)
    index = torch.as_tensor(token_step, device=step_values.device).long()
    # Negative entries read the zero column after the last step. Remapping costs a full pass
    # over the index, so it is skipped when nothing needs it.
    negative = index < 0
    if negative.any():
        index = torch.where(negative, padded.shape[1] - 1, index)
    return padded.gather(1, index)
