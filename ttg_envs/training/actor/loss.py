"""The actor objective of DeltaTTG (paper section 3.2, eq. 12, and appendix D.5, eqs 15-18).

Every function works on token-level tensors of one batch, ``[N, L]``: ``mask`` is 1 on the
trainable (assistant-generated) tokens and 0 on prompt, observation and padding tokens. The
advantages are the redistributed ones, A_i w_{i,t} broadcast to the tokens of action t, held
fixed during the update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "ActorLossConfig",
    "LossTerms",
    "actor_loss",
    "clipped_surrogate",
    "kl_low_var",
    "masked_mean",
    "token_entropy",
    "token_logprobs",
]


@dataclass(frozen=True)
class ActorLossConfig:
    """Coefficients of the actor loss; defaults are paper table 4 for ALFWorld.

    Attributes:
        clip_low: eta_low, the ratio is clipped below at 1 - clip_low (0.2).
        clip_high: eta_high, the ratio is clipped above at 1 + clip_high (0.28).
        dual_clip: d of eq. 17, a floor d * A on the surrogate of negative-advantage tokens (3).
        kl_coef: weight of the low-variance KL to the reference policy (0.01 on ALFWorld, 0.001 on
            PaperSearchQA and AgentWorldModel with Qwen3-4B).
        entropy_coef: weight of the entropy bonus (0.001 on ALFWorld, 0 elsewhere).
    """

    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float = 3.0
    kl_coef: float = 0.01
    entropy_coef: float = 0.001


@dataclass
class LossTerms:
    """The actor loss and its parts (all token means over the mask).

    ``loss`` carries the gradient; the other fields are detached floats for logging.
    ``clip_frac`` is the share of tokens where the ratio clip binds, ``dual_clip_frac`` the share
    where the dual-clip floor binds.
    """

    loss: torch.Tensor
    pg_loss: float
    kl: float
    entropy: float
    clip_frac: float
    dual_clip_frac: float


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean reduction: sum of ``values`` over the mask divided by the number of masked tokens."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """log pi(token | prefix) of ``token_ids`` ``[N, L]`` under ``logits`` ``[N, L, V]`` (already aligned)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at every position: ``[N, L, V] -> [N, L]``."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float | None = 3.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L_PG of eq. 18: minus the token mean of the dual-clipped surrogate (eqs 15-17).

    r = exp(logprobs - old_logprobs); s = min(r A, clip(r, 1 - clip_low, 1 + clip_high) A);
    where A < 0, s = max(s, dual_clip * A). ``dual_clip=None`` turns the dual clip off.
    Returns ``(loss, clipped, dual_clipped)``, the last two boolean ``[N, L]`` maps of the tokens
    where each clip binds (for logging).
    """
    import torch

    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped_value = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * advantages
    surrogate = torch.minimum(unclipped, clipped_value)
    clipped = clipped_value < unclipped
    dual = torch.zeros_like(clipped)
    if dual_clip is not None:
        floor = dual_clip * advantages
        dual = (advantages < 0) & (surrogate < floor)
        surrogate = torch.where(dual, floor, surrogate)
    return -masked_mean(surrogate, mask), clipped, dual


def kl_low_var(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """The low-variance (k3) estimator of KL(pi || pi_ref) per token: exp(d) - d - 1, d = ref - logp.

    Non-negative and unbiased for samples from pi. The log-ratio is clamped to [-20, 20] and the
    estimate to at most 10 so that one rare token cannot blow up the loss.
    """
    d = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    return (d.exp() - d - 1.0).clamp(max=10.0)


def actor_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    config: ActorLossConfig = ActorLossConfig(),
) -> LossTerms:
    """L = L_PG + kl_coef * KL - entropy_coef * H, every term a token mean over ``mask``.

    ``ref_logprobs`` (the frozen reference policy) and ``entropy`` (``token_entropy`` of the
    current logits) may be None; their terms are then left out.
    """
    import torch

    pg, clipped, dual = clipped_surrogate(logprobs, old_logprobs, advantages, mask, config.clip_low, config.clip_high, config.dual_clip)
    loss = pg
    kl = torch.zeros((), dtype=pg.dtype)
    if ref_logprobs is not None:
        kl = masked_mean(kl_low_var(logprobs, ref_logprobs), mask)
        loss = loss + config.kl_coef * kl
    ent = torch.zeros((), dtype=pg.dtype)
    if entropy is not None:
        ent = masked_mean(entropy, mask)
        loss = loss - config.entropy_coef * ent
    m = mask.bool()
    return LossTerms(
        loss=loss,
        pg_loss=float(pg.detach()),
        kl=float(kl.detach()),
        entropy=float(ent.detach()),
        clip_frac=float(masked_mean(clipped.float(), m)),
        dual_clip_frac=float(masked_mean(dual.float(), m)),
    )
