"""Tests for ttg_envs.credit: hand-worked values, properties, fallbacks, baselines."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttg_envs.credit import (
    bounded_token_weights,
    dapo_accumulate,
    dapo_filter,
    encode_keys,
    gigpo,
    group_advantages,
    grpo,
    hgpo,
    step_costs,
    step_weights,
)

C = 100.0
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# Values worked by hand
# ---------------------------------------------------------------------------------------------


def test_group_advantages_by_hand():
    # rewards [1, 0, 0], steps [2, 1, 3]: K = 6 rows, mu = 2/6 = 1/3.
    # sigma^2 = (2 (2/3)^2 + 1 (1/3)^2 + 3 (1/3)^2) / 5 = (8/9 + 4/9) / 5 = 4/15.
    sigma = math.sqrt(4 / 15)
    expected = [(2 / 3) / (sigma + 1e-6), (-1 / 3) / (sigma + 1e-6), (-1 / 3) / (sigma + 1e-6)]
    np.testing.assert_allclose(group_advantages([1, 0, 0], [2, 1, 3]), expected, rtol=1e-12)
    # Step expansion matters: per-trajectory statistics would give [1.1547, -0.5774, -0.5774].
    assert group_advantages([1, 0, 0], [2, 1, 3])[0] == pytest.approx(1.2910, abs=1e-4)


def test_group_advantages_without_spread_are_zero():
    np.testing.assert_array_equal(group_advantages([1, 1, 1], [3, 1, 2]), [0, 0, 0])
    np.testing.assert_array_equal(group_advantages([7.0], [1]), [0.0])


def test_step_costs_by_hand():
    # Failed trajectory: h_0, h_1 completable with 50 and 30 tokens left, h_2 predicted failing
    # (cost C), terminal anchor C.
    np.testing.assert_array_equal(step_costs([True, True, False], [50, 30, None], False, C), [50, 30, 100, 100])
    # Successful trajectory: terminal anchor 0.
    np.testing.assert_array_equal(step_costs([True, True, True], [40, 40, 10], True, C), [40, 40, 10, 0])
    # NaN is as good as None where the state is not completable; remaining may be omitted.
    np.testing.assert_array_equal(step_costs([False, False], None, True, C), [100, 100, 0])


def test_step_costs_rejects_missing_estimate():
    with pytest.raises(ValueError):
        step_costs([True, True], [5, None], True, C)
    with pytest.raises(ValueError):
        step_costs([True], [5], True, C, signal="nonsense")


def test_step_weights_negative_advantage_by_hand():
    # Failed trajectory, A < 0. c = [50, 30, 100, 100], Delta = c_t - c_{t+1} = [20, -70, 0].
    # Sign-aware mass m = max(-Delta, 0) = [0, 70, 0]; q = 0.2/3 + 0.8 [0, 1, 0] = [1, 13, 1] / 15.
    # n = [10, 20, 30]: N = 60, sum n q = (10 + 260 + 30) / 15 = 20,
    # w0 = 60 q / 20 = [0.2, 2.6, 0.2].
    args = ([True, True, False], [50, 30, None], False, [10, 20, 30], C)
    np.testing.assert_allclose(step_weights(-0.8, *args, rho=0.2, cap=5.0), [0.2, 2.6, 0.2], rtol=1e-12)
    # Cap M = 2: excess E = 20 (2.6 - 2) = 12, room R = 10 (1.8) + 30 (1.8) = 72, E/R = 1/6,
    # uncapped: 2 - 1.8 (1 - 1/6) = 0.5. Token mean: 10 (0.5) + 20 (2) + 30 (0.5) = 60 = N.
    np.testing.assert_allclose(step_weights(-0.8, *args, rho=0.2, cap=2.0), [0.5, 2.0, 0.5], rtol=1e-12)


def test_step_weights_positive_advantage_by_hand():
    # Successful trajectory, A > 0. c = [40, 40, 10, 0], Delta = [0, 30, 10], m = Delta, sum 40.
    # q = 1/15 + 0.8 [0, 3/4, 1/4] = [1, 10, 4] / 15; sum n q = (10 + 200 + 120) / 15 = 22.
    # w0 = 60 q / 22 = [2, 20, 8] / 11.
    args = ([True, True, True], [40, 40, 10], True, [10, 20, 30], C)
    np.testing.assert_allclose(step_weights(1.3, *args), [2 / 11, 20 / 11, 8 / 11], rtol=1e-12)
    # Cap 1.5: E = 20 (20/11 - 3/2) = 70/11; R = 10 (29/22) + 30 (17/22) = 400/11; E/R = 7/40.
    # w_0 = 1.5 - (29/22)(33/40) = 0.4125, w_2 = 1.5 - (17/22)(33/40) = 0.8625.
    np.testing.assert_allclose(step_weights(1.3, *args, cap=1.5), [0.4125, 1.5, 0.8625], rtol=1e-12)


def test_bounded_token_weights_by_hand():
    # q = [13, 1, 1] / 15, n = [10, 20, 30]: sum n q = 12, w0 = 5 q = [13/3, 1/3, 1/3].
    # Cap 4: E = 10 (1/3) = 10/3, R = 50 (11/3) = 550/3, E/R = 1/55; 4 - (11/3)(54/55) = 0.4.
    q = np.array([13, 1, 1]) / 15
    np.testing.assert_allclose(bounded_token_weights(q, [10, 20, 30], 5.0), [13 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(bounded_token_weights(q, [10, 20, 30], 4.0), [4.0, 0.4, 0.4])
    # A step without tokens takes no part in the mean and gets what one of its tokens would.
    np.testing.assert_allclose(bounded_token_weights([0.5, 0.25, 0.25], [0, 1, 1], 5.0), [2.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        bounded_token_weights(q, [1, 1, 1], 0.5)


# ---------------------------------------------------------------------------------------------
# Fallbacks (Algorithm 1)
# ---------------------------------------------------------------------------------------------


def test_zero_advantage_keeps_original_even_with_unread_garbage():
    assert step_weights(0.0, [True, True], [None, None], True, [3, 4], C).tolist() == [1.0, 1.0]


def test_no_completable_state_keeps_original():
    assert step_weights(1.0, [False, False, False], None, True, [3, 4, 5], C).tolist() == [1.0] * 3


def test_zero_mass_uses_uniform_shares():
    # A < 0 on a trajectory whose cost only falls: no regression, sum m = 0, q uniform -> ones.
    w = step_weights(-1.0, [True, True], [20, 10], True, [3, 9], C)
    np.testing.assert_allclose(w, [1.0, 1.0])
    # rho = 0 too (eq. 22 keeps the equal-share fallback).
    np.testing.assert_allclose(step_weights(-1.0, [True, True], [20, 10], True, [3, 9], C, rho=0.0), [1, 1])


# ---------------------------------------------------------------------------------------------
# Ablation variants (appendix E.4)
# ---------------------------------------------------------------------------------------------


def test_ablation_potentials():
    # logit: S = clip(z, -10, 10) = [0, 5, 10], S_T = +10 on success;
    # Delta = S_{t+1} - S_t = [5, 5, 0].
    c = step_costs([True, True, True], None, True, C, signal="logit", score=[0, 5, 20])
    np.testing.assert_array_equal(c[:-1] - c[1:], [5, 5, 0])
    # Failure: S_0 = clip(-30) = -10 and S_T = -10, so Delta = 0.
    c = step_costs(None, None, False, C, signal="logit", score=[-30.0])
    np.testing.assert_array_equal(c[:-1] - c[1:], [0.0])
    # value: Delta = S(h_{t+1}) - S(h_t), terminal anchored to the observed final score.
    c = step_costs(None, None, True, C, signal="value", score=[0.2, 0.5, 0.9], final_score=0.7)
    np.testing.assert_allclose(c[:-1] - c[1:], [0.3, 0.4, -0.2])
    c = step_costs(None, None, True, C, signal="value", score=[0.5])
    np.testing.assert_allclose(c[:-1] - c[1:], [0.5])
    # feasibility: C_feas = [0, C, 0] and 0 at the successful end; Delta = [-C, C, 0].
    c = step_costs([True, False, True], [999, None, 999], True, C, signal="feasibility")
    np.testing.assert_array_equal(c[:-1] - c[1:], [-C, C, 0])


def test_positive_only_and_rho_zero():
    # Failed, A < 0: c = [50, 30, 100, 100], Delta = [20, -70, 0]. positive_only: m = [20, 0, 0],
    # q = [13, 1, 1] / 15, w = [13/3, 1/3, 1/3] with n = [10, 20, 30] (see the B_M test).
    args = ([True, True, False], [50, 30, None], False, [10, 20, 30], C)
    np.testing.assert_allclose(step_weights(-1.0, *args, positive_only=True), [13 / 3, 1 / 3, 1 / 3])
    # rho = 0: q = m / sum m = [0, 1, 0]; w0 = [0, 3, 0]: no credit outside the regression step.
    np.testing.assert_allclose(step_weights(-1.0, *args, rho=0.0), [0.0, 3.0, 0.0])
    # value signal without completion labels: the no-completable fallback does not apply.
    w = step_weights(1.0, None, None, True, [1, 1], C, signal="value", score=[0.0, 0.5], rho=0.0)
    np.testing.assert_allclose(w, [1.0, 1.0])  # Delta = [0.5, 0.5]: equal shares


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


def _water_fill(q: np.ndarray, n: np.ndarray, cap: float) -> np.ndarray:
    """Literal iterative reading of appendix D.4, to check the one-pass solution against."""
    w = n.sum() * q / (n * q).sum()
    for _ in range(100):
        over = w > cap * (1 + 1e-12)
        if not over.any():
            return w
        excess = (n * (w - cap))[over].sum()
        room = np.where(over, 0.0, cap - w)
        w = np.where(over, cap, w + excess * room / (n * room).sum())
    raise AssertionError("water-filling did not settle")


@st.composite
def trajectories(draw, rho=None):
    steps = draw(st.integers(1, 8))
    can = draw(st.lists(st.booleans(), min_size=steps, max_size=steps))
    remaining = [draw(st.integers(0, 500)) if c else None for c in can]
    n = draw(st.lists(st.integers(0, 40), min_size=steps, max_size=steps))
    advantage = draw(st.one_of(st.sampled_from([0.0, -1.0, 1.0]), st.floats(-4, 4, allow_subnormal=False)))
    return dict(
        advantage=advantage,
        can_complete=can,
        remaining=remaining,
        success=draw(st.booleans()),
        n_tokens=n,
        failure_cost=draw(st.sampled_from([100.0, 600.0, 16384.0])),
        rho=draw(st.sampled_from([0.2, 0.05, 0.5, 1.0]) if rho is None else rho),
        cap=draw(st.floats(1.0, 6.0)),
        positive_only=draw(st.booleans()),
    )


@given(trajectories())
def test_step_weight_properties(traj):
    w = step_weights(**traj)
    n = np.asarray(traj["n_tokens"], float)
    assert w.shape == (len(n),)
    assert (w <= traj["cap"] + 1e-12).all()
    assert (w > 0).all()  # rho > 0: every token keeps the trajectory's sign
    token_advantages = np.repeat(traj["advantage"] * w, traj["n_tokens"])
    assert (np.sign(token_advantages) == np.sign(traj["advantage"])).all()
    if n.sum() > 0:
        assert (n * w).sum() == pytest.approx(n.sum(), rel=1e-9)  # unit token mean


@given(trajectories(rho=st.just(0.0)))
def test_rho_zero_never_flips_sign(traj):
    w = step_weights(**traj)
    assert (w >= 0).all() and (w <= traj["cap"] + 1e-12).all()


@given(
    st.lists(
        st.tuples(st.floats(0, 10, allow_subnormal=False), st.integers(0, 30)),
        min_size=1,
        max_size=10,
    ),
    st.floats(1.0, 8.0),
)
def test_bounded_token_weights_properties(steps, cap):
    q = np.array([s[0] for s in steps])
    n = np.array([s[1] for s in steps], float)
    w = bounded_token_weights(q, n, cap)
    assert ((w >= 0) & (w <= cap)).all()
    if (n * q).sum() > 0 and n.sum() > 0:
        assert (n * w).sum() == pytest.approx(n.sum(), rel=1e-9)
        carried = n > 0
        expected = _water_fill(q[carried], n[carried], cap)
        np.testing.assert_allclose(w[carried], expected, rtol=1e-9, atol=1e-12)
        # Order is preserved: more share never means a smaller multiplier.
        order = np.argsort(q[carried], kind="stable")
        assert (np.diff(w[carried][order]) >= -1e-12).all()
    else:
        np.testing.assert_array_equal(w, np.ones(len(q)))


# ---------------------------------------------------------------------------------------------
# Baselines (appendix B)
# ---------------------------------------------------------------------------------------------


def test_grpo_broadcasts_group_advantage():
    out = grpo([1, 0, 0], [2, 1, 3])
    expected = group_advantages([1, 0, 0], [2, 1, 3])
    assert [len(a) for a in out] == [2, 1, 3]
    for a, e in zip(out, expected, strict=False):
        np.testing.assert_allclose(a, e)


def test_gigpo_identical_state_keys():
    # Two trajectories start in the same state s0, then diverge. Rewards [1, 0], gamma 0.95:
    # returns [0.95, 1] and [0, 0]. Episode level (K = 4): mu = 1/2, sigma = sqrt(1/3),
    # A^E = ±0.8660. Step group {s0}: values [0.95, 0] -> ±(0.475 / (0.95 / sqrt 2)) = ±1/sqrt 2;
    # the other steps are alone: 0.
    out = gigpo([1, 0], [["s0", "a"], ["s0", "b"]])
    ae = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    np.testing.assert_allclose(out[0], [ae + 1 / math.sqrt(2), ae], rtol=1e-5)
    np.testing.assert_allclose(out[1], [-ae - 1 / math.sqrt(2), -ae], rtol=1e-5)
    # Identical keys and identical outcomes: no step signal at all.
    same = gigpo([1, 1], [["s", "t"], ["s", "t"]])
    np.testing.assert_allclose(np.concatenate(same), 0.0, atol=1e-9)
    # All keys distinct: GiGPO reduces to GRPO.
    for a, b in zip(gigpo([1, 0, 1], [["a"], ["b", "c"], ["d"]]), grpo([1, 0, 1], [1, 2, 1]), strict=False):
        np.testing.assert_allclose(a, b)
    # step_weight scales only the step part.
    assert gigpo([1, 0], [["s0", "a"], ["s0", "b"]], step_weight=0.0)[0][0] == pytest.approx(ae)


def test_hgpo_by_hand():
    # Keys a: [s, m], b: [s, m], c: [u, m]; rewards [1, 0, 0]; returns a [0.95, 1], b, c [0, 0].
    # A^E (K = 6, mu = 1/3, sigma = sqrt(4/15)) = [1.2910, -0.6455, -0.6455].
    # t = 0: {a0, b0} at every level (same start): A_k = ±1/sqrt2, so A^H = ±0.7071; c0 alone: 0.
    # t = 1, level 0 {a1, b1, c1}: [1, 0, 0] -> [1.1547, -0.5774, -0.5774];
    #        levels 1, 2 {a1, b1} (history s): ±0.7071; c1 has company only at level 0.
    # A^H(a1) = (1 * 1.1547 + 2 * 0.7071 + 3 * 0.7071) / 6 = 0.7817,
    # A^H(b1) = (-0.5774 - 5 * 0.7071) / 6 = -0.6855, A^H(c1) = -0.5774.
    out = hgpo([1, 0, 0], [["s", "m"], ["s", "m"], ["u", "m"]])
    ae = [1.29099, -0.645497, -0.645497]
    np.testing.assert_allclose(out[0], [ae[0] + 0.707107, ae[0] + 0.781700], atol=2e-5)
    np.testing.assert_allclose(out[1], [ae[1] - 0.707107, ae[1] - 0.685477], atol=2e-5)
    np.testing.assert_allclose(out[2], [ae[2], ae[2] - 0.577350], atol=2e-5)


def test_hgpo_level_zero_only_is_gigpo():
    keys = [["s", "m", "x"], ["t", "m", "x"], ["s", "m"]]
    for a, b in zip(hgpo([1, 0, 0.5], keys, context=0), gigpo([1, 0, 0.5], keys), strict=False):
        np.testing.assert_allclose(a, b)


def test_dapo_filter():
    # Group a all 1 (std 0): dropped; b mixed: kept; c single (std 0): dropped.
    keep = dapo_filter([1, 1, 0, 1, 0.5], ["a", "a", "b", "b", "c"])
    assert keep.tolist() == [False, False, True, True, False]
    assert dapo_filter([0.0, 5e-5], [0, 0]).tolist() == [False, False]  # std 2.5e-5 < 1e-4


def test_dapo_accumulate_stops_at_target_and_truncates():
    consumed = []

    def batches():
        for i, batch in enumerate(
            [
                ([1, 1, 0, 1], [0, 0, 1, 1]),  # one group kept
                ([0, 1, 1, 0, 0, 0], [0, 0, 1, 1, 2, 2]),  # two kept, one needed
                ([0, 1], [0, 0]),  # never generated
            ]
        ):
            consumed.append(i)
            yield batch

    masks = dapo_accumulate(batches(), target_groups=2)
    assert consumed == [0, 1]
    assert [m.tolist() for m in masks] == [
        [False, False, True, True],
        [True, True, False, False, False, False],
    ]


def test_dapo_accumulate_gives_up_after_max_batches():
    def batches():
        while True:
            yield [1, 1], [0, 0]

    masks = dapo_accumulate(batches(), target_groups=3, max_batches=10)
    assert len(masks) == 10 and not any(m.any() for m in masks)


def test_encode_keys():
    codes = encode_keys([["a", "b"], ["b"], []])
    assert codes.tolist() == [[0, 1], [1, -1], [-1, -1]]


def test_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from ttg_envs import credit\n"
        "print(credit.step_weights(1.0, [True], [3], True, [2], 10.0))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1.]"


# ---------------------------------------------------------------------------------------------
# Batched forms (torch) against the per-trajectory forms
# ---------------------------------------------------------------------------------------------


def _pad(rows, width, fill, dtype):
    out = np.full((len(rows), width), fill, dtype=dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _token_index(n_tokens):
    rows = [np.repeat(np.arange(len(n)), n) for n in n_tokens]
    return _pad(rows, max(1, max(len(r) for r in rows)), -1, np.int64)


@st.composite
def batches(draw):
    trajs = []
    for group in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            steps = draw(st.integers(1, 6))
            can = draw(st.lists(st.booleans(), min_size=steps, max_size=steps))
            trajs.append(
                dict(
                    group=group,
                    reward=draw(st.sampled_from([0.0, 1.0, 0.5])),
                    success=draw(st.booleans()),
                    can=can,
                    remaining=[draw(st.integers(0, 300)) if c else None for c in can],
                    score=draw(st.lists(st.floats(-15, 15), min_size=steps, max_size=steps)),
                    n=draw(st.lists(st.integers(0, 5), min_size=steps, max_size=steps)),
                    valid=draw(st.sampled_from([True, True, True, False])),
                    keys=draw(st.lists(st.sampled_from("xyz"), min_size=steps, max_size=steps)),
                )
            )
    return trajs


def _reference(trajs, signal="ttg", positive_only=False, rho=0.2, cap=5.0):
    """Per-trajectory forms plus Algorithm 1's group rule: step advantages per trajectory."""
    out = [None] * len(trajs)
    for g in sorted({t["group"] for t in trajs}):
        members = [i for i, t in enumerate(trajs) if t["group"] == g]
        adv = group_advantages([trajs[i]["reward"] for i in members], [len(trajs[i]["n"]) for i in members])
        group_ok = all(trajs[i]["valid"] or a == 0 for i, a in zip(members, adv, strict=False))
        for i, a in zip(members, adv, strict=False):
            t = trajs[i]
            if group_ok:
                w = step_weights(
                    a,
                    None if signal == "value" else t["can"],
                    t["remaining"],
                    t["success"],
                    t["n"],
                    300.0,
                    rho,
                    cap,
                    signal=signal,
                    positive_only=positive_only,
                    score=t["score"],
                )
            else:
                w = np.ones(len(t["n"]))
            out[i] = a * w
    return out


def _batched_inputs(trajs, signal):
    width = max(len(t["n"]) for t in trajs)
    return dict(
        rewards=[t["reward"] for t in trajs],
        group_ids=[t["group"] for t in trajs],
        num_steps=[len(t["n"]) for t in trajs],
        can_complete=None if signal == "value" else _pad([t["can"] for t in trajs], width, False, bool),
        remaining=_pad(
            [[np.nan if r is None else r for r in t["remaining"]] for t in trajs],
            width,
            np.nan,
            float,
        ),
        success=[t["success"] for t in trajs],
        n_tokens=_pad([t["n"] for t in trajs], width, 0, np.int64),
        failure_cost=300.0,
        valid=[t["valid"] for t in trajs],
        score=_pad([t["score"] for t in trajs], width, 0.0, float),
    )


@settings(deadline=None)
@given(
    batches(),
    st.sampled_from(["ttg", "value", "logit", "feasibility"]),
    st.booleans(),
    st.sampled_from([0.0, 0.2]),
    st.sampled_from([1.0, 1.5, 5.0]),
)
def test_batched_matches_per_trajectory(trajs, signal, positive_only, rho, cap):
    torch = pytest.importorskip("torch")
    from ttg_envs.credit import batched_token_advantages

    expected = _reference(trajs, signal, positive_only, rho, cap)
    inputs = _batched_inputs(trajs, signal)
    common = dict(signal=signal, positive_only=positive_only, rho=rho, cap=cap, dtype=torch.float64)
    steps = batched_token_advantages(**inputs, **common).numpy()
    width = steps.shape[1]
    np.testing.assert_allclose(steps, _pad(expected, width, 0.0, float), atol=1e-5)
    n_tokens = [t["n"] for t in trajs]
    tokens = batched_token_advantages(**inputs, **common, token_step=_token_index(n_tokens)).numpy()
    flat = [np.repeat(e, n) for e, n in zip(expected, n_tokens, strict=False)]
    np.testing.assert_allclose(tokens, _pad(flat, tokens.shape[1], 0.0, float), atol=1e-5)


def test_batched_group_rule_and_per_state_valid():
    torch = pytest.importorskip("torch")
    from ttg_envs.credit import batched_group_advantages, batched_token_advantages

    # Group 0 has an invalid state on a queried trajectory: both keep A_i on every step.
    # Group 1 is valid and gets redistributed credit.
    inputs = dict(
        rewards=[1.0, 0.0, 1.0, 0.0],
        group_ids=[7, 7, 3, 3],
        num_steps=[2, 2, 2, 2],
        can_complete=[[True, True]] * 4,
        remaining=[[40.0, 10.0], [10.0, 40.0]] * 2,
        success=[True, False, True, False],
        n_tokens=[[1, 1]] * 4,
        failure_cost=100.0,
        valid=[[True, True], [True, False], [True, True], [True, True]],
        dtype=torch.float64,
    )
    out = batched_token_advantages(**inputs).numpy()
    adv = batched_group_advantages(inputs["rewards"], inputs["group_ids"], inputs["num_steps"]).numpy()
    np.testing.assert_allclose(out[:2], np.repeat(adv[:2, None], 2, axis=1), rtol=1e-6)
    assert not np.allclose(out[2], adv[2])
    np.testing.assert_allclose(out[2:].mean(axis=1), adv[2:], rtol=1e-6)  # unit token mean

    # Predictions on invalid groups are never read, even if missing.
    inputs["remaining"] = [[np.nan, np.nan]] * 2 + inputs["remaining"][2:]
    np.testing.assert_allclose(batched_token_advantages(**inputs).numpy(), out)
    inputs["remaining"] = [[40.0, 10.0]] * 2 + [[np.nan, 10.0]] * 2
    with pytest.raises(ValueError):
        batched_token_advantages(**inputs)


@settings(deadline=None)
@given(batches(), st.integers(0, 3))
def test_batched_baselines_match_per_group(trajs, history):
    torch = pytest.importorskip("torch")
    from ttg_envs.credit import batched_gigpo, batched_grpo, batched_hgpo

    rewards = [t["reward"] for t in trajs]
    groups = [t["group"] for t in trajs]
    lengths = [len(t["keys"]) for t in trajs]
    keys = encode_keys([t["keys"] for t in trajs])
    expected = {
        "grpo": [None] * len(trajs),
        "gigpo": [None] * len(trajs),
        "hgpo": [None] * len(trajs),
    }
    for g in set(groups):
        members = [i for i in range(len(trajs)) if groups[i] == g]
        member_rewards = [rewards[i] for i in members]
        member_keys = [trajs[i]["keys"] for i in members]
        results = {
            "grpo": grpo(member_rewards, [lengths[i] for i in members]),
            "gigpo": gigpo(member_rewards, member_keys),
            "hgpo": hgpo(member_rewards, member_keys, context=history),
        }
        for name, values in results.items():
            for i, v in zip(members, values, strict=False):
                expected[name][i] = v
    width = keys.shape[1]
    got = {
        "grpo": batched_grpo(rewards, groups, lengths, dtype=torch.float64),
        "gigpo": batched_gigpo(rewards, groups, lengths, keys, dtype=torch.float64),
        "hgpo": batched_hgpo(rewards, groups, lengths, keys, context=history, dtype=torch.float64),
    }
    for name in got:
        np.testing.assert_allclose(got[name].numpy(), _pad(expected[name], width, 0.0, float), atol=1e-5)
    token_step = _token_index([t["n"] for t in trajs])
    tokens = batched_gigpo(rewards, groups, lengths, keys, token_step=token_step, dtype=torch.float64)
    flat = [np.repeat(e, t["n"]) for e, t in zip(expected["gigpo"], trajs, strict=False)]
    np.testing.assert_allclose(tokens.numpy(), _pad(flat, token_step.shape[1], 0.0, float), atol=1e-5)


@settings(deadline=None, max_examples=50)
@given(batches(), st.sampled_from([0.0, 0.2]), st.sampled_from([1.0, 5.0]))
def test_batched_reads_recorded_costs_as_it_computes_them(trajs, rho, cap):
    # The trainer passes ProgressMeterWrapper's recorded ttg_cost (c_0..c_T): the same advantages as
    # rebuilding the costs from the estimates and C, so C needs to reach the trainer only once.
    torch = pytest.importorskip("torch")
    from ttg_envs.credit import batched_token_advantages

    inputs = _batched_inputs(trajs, "ttg")
    width = inputs["n_tokens"].shape[1]
    recorded = np.zeros((len(trajs), width + 1))
    for i, t in enumerate(trajs):
        states = [r if can else 300.0 for can, r in zip(t["can"], [np.nan if r is None else r for r in t["remaining"]])]
        recorded[i, : len(states) + 1] = [*states, 0.0 if t["success"] else 300.0]
    common = dict(rho=rho, cap=cap, dtype=torch.float64)
    computed = batched_token_advantages(**inputs, **common).numpy()
    read = batched_token_advantages(**{**inputs, "remaining": None, "failure_cost": -1.0}, costs=recorded, **common).numpy()
    np.testing.assert_array_equal(read, computed)
