"""Meters shipped with the package: ``load_meter("ttg/ALFWorld-v0")`` works with no training.

Each shipped meter is an encoder meter (:class:`~ttg_envs.meters.encoder.EncoderMeter`: a small
BERT built from a config, with a GRU and regression head) trained by ``scripts/build_meters.sh`` on
the env's bundled train split from four scripted policies, saved under ``meters/shipped/<name>`` (``EnvRecord.meter``)
with its held-out figures in ``meter.json`` (``heldout``). The tool envs have no meter of their
own: like the paper, which reuses its engineering-task meter, they get the AWM meter.
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
