"""Meters shipped with the package: ``load_meter("ttg/ALFWorld-v0")`` works with no training.

Each shipped meter is an encoder meter (:class:`~ttg_envs.meters.encoder.EncoderMeter`: a small
BERT built from a config, with a GRU and regression head) trained by ``scripts/build_meters.sh`` on
the env's bundled train split from scripted policies of different quality, saved under
``meters/shipped/<name>`` (``EnvRecord.meter``) with its held-out figures in ``meter.json``
(``heldout``). BFCL's and tau2's are trained on gold replays and perturbed gold of their own
(before, they reused the AWM meter, as the paper reuses its engineering-task meter; its figures on
the same held-out trajectories are ``heldout_previous``).
"""

from __future__ import annotations

from pathlib import Path

from ..registry import ENV_SPECS

SHIPPED = Path(__file__).parent / "shipped"


def ready_meter_path(env_id: str) -> Path:
    """The shipped meter folder for ``env_id``; a ``LookupError`` names what exists when there is none."""
    spec = ENV_SPECS.get(env_id)
    path = SHIPPED / spec.meter if spec and spec.meter else None
    if path is None or not (path / "meter.json").is_file():
        have = sorted(s.id for s in ENV_SPECS.values() if s.meter and (SHIPPED / s.meter / "meter.json").is_file())
        raise LookupError(f"no meter ships for {env_id!r}; shipped meters: {', '.join(have) or 'none'}")
    return path
