"""The actor loss against values worked by hand (paper eqs 15-18, appendix D.5)."""

import math

import pytest

torch = pytest.importorskip("torch")

from ttg_envs.training.actor.loss import (
    ActorLossConfig,
    actor_loss,
    clipped_surrogate,
    kl_low_var,
    masked_mean,
    token_entropy,
    token_logprobs,
)


def _ratios_to_logps(ratios):
    old = torch.zeros(1, len(ratios), dtype=torch.float64)
    return torch.log(torch.tensor([ratios], dtype=torch.float64)), old


def test_clipped_surrogate_by_hand():
    # token: ratio, A -> surrogate s (eqs 16-17, interval [0.8, 1.28], d = 3)
    #   1.1,  1 -> min(1.1, 1.1)             =  1.1   inside the range
    #   1.5,  1 -> min(1.5, 1.28)            =  1.28  upper clip binds
    #   0.5,  1 -> min(0.5, 0.8)             =  0.5   lower clip does not bind for A > 0
    #   0.5, -1 -> min(-0.5, -0.8)           = -0.8   lower clip binds for A < 0
    #   5.0, -1 -> min(-5, -1.28) = -5 -> max(-5, -3) = -3   dual clip binds
    #   2.0, -2 -> min(-4, -2.56) = -4 -> max(-4, -6) = -4   dual clip does not bind
    #   9.0, 10 -> masked out
    logp, old = _ratios_to_logps([1.1, 1.5, 0.5, 0.5, 5.0, 2.0, 9.0])
    adv = torch.tensor([[1.0, 1, 1, -1, -1, -2, 10]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    loss, clipped, dual = clipped_surrogate(logp, old, adv, mask)
    expected = -(1.1 + 1.28 + 0.5 - 0.8 - 3.0 - 4.0) / 6
    assert float(loss) == pytest.approx(expected)
    assert clipped[0, :6].tolist() == [False, True, False, True, False, False]
    assert dual[0, :6].tolist() == [False, False, False, False, True, False]


def test_no_dual_clip_and_token_mean_over_rows():
    # Two rows with 1 and 3 trainable tokens: the token mean weighs each token equally (1/4),
    # not each row (a sequence mean would give row 0 weight 1/2).
    logp, old = _ratios_to_logps([5.0, 1.0, 1.0, 1.0])
    logp, old = logp.view(2, 2), old.view(2, 2)
    adv = torch.tensor([[-1.0, 0.0], [2.0, 2.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 0], [1, 1]])
    loss, _, _ = clipped_surrogate(logp, old, adv, mask, dual_clip=None)
    # tokens: (5, -1) -> -5 (no floor); (1, 2) -> 2; (1, 2) -> 2
    assert float(loss) == pytest.approx(-(-5.0 + 2.0 + 2.0) / 3)


def test_kl_k3_by_hand():
    logp = torch.log(torch.tensor([0.5, 0.3]))
    ref = torch.log(torch.tensor([0.25, 0.3]))
    kl = kl_low_var(logp, ref)
    # d = ln(0.25 / 0.5) = -ln 2: exp(d) - d - 1 = 0.5 + ln 2 - 1; equal policies give 0.
    assert kl[0].item() == pytest.approx(0.5 + math.log(2) - 1)
    assert kl[1].item() == pytest.approx(0.0, abs=1e-7)
    assert kl_low_var(torch.tensor([0.0]), torch.tensor([-100.0])).item() <= 10.0


def test_logprobs_entropy_and_full_loss():
    logits = torch.zeros(1, 2, 4, dtype=torch.float64)  # uniform over 4 tokens
    ids = torch.tensor([[1, 3]])
    logp = token_logprobs(logits, ids)
    assert logp[0].tolist() == pytest.approx([math.log(0.25)] * 2)
    ent = token_entropy(logits)
    assert ent[0].tolist() == pytest.approx([math.log(4)] * 2)

    mask = torch.tensor([[1, 1]])
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    ref = logp + math.log(0.5)  # ref assigns half the probability: d = -ln 2 on every token
    cfg = ActorLossConfig(kl_coef=0.01, entropy_coef=0.001)
    terms = actor_loss(logp, logp.detach(), adv, mask, ref_logprobs=ref, entropy=ent, config=cfg)
    kl = 0.5 + math.log(2) - 1
    # ratio 1 everywhere: s = A, token mean (1 - 1) / 2 = 0
    assert terms.pg_loss == pytest.approx(0.0)
    assert terms.kl == pytest.approx(kl)
    assert terms.entropy == pytest.approx(math.log(4))
    assert float(terms.loss) == pytest.approx(0.01 * kl - 0.001 * math.log(4))
    assert terms.clip_frac == 0.0 and terms.dual_clip_frac == 0.0


def test_gradient_follows_the_advantage():
    logits = torch.zeros(1, 1, 3, requires_grad=True)
    ids = torch.tensor([[2]])
    logp = token_logprobs(logits, ids)
    terms = actor_loss(logp, logp.detach(), torch.tensor([[1.0]]), torch.tensor([[1]]))
    terms.loss.backward()
    # Descending the loss raises the logit of the sampled token, lowers the others.
    assert logits.grad[0, 0, 2] < 0 and (logits.grad[0, 0, :2] > 0).all()


def test_masked_mean_of_empty_mask_is_zero():
    assert float(masked_mean(torch.ones(2, 2), torch.zeros(2, 2))) == 0.0


def test_defaults_follow_table_4():
    cfg = ActorLossConfig()
    assert (cfg.clip_low, cfg.clip_high, cfg.dual_clip) == (0.2, 0.28, 3.0)
    assert (cfg.kl_coef, cfg.entropy_coef) == (0.01, 0.001)
