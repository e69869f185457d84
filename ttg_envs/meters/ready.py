"""Meters shipped with the package: ``load_meter("ttg/ALFWorld-v0")`` works with no training.

Each shipped meter is an encoder meter (:class:`~ttg_envs.meters.encoder.EncoderMeter`: a small
BERT built from a config, with a GRU and regression head) trained by ``scripts/build_meters.sh`` on
the env's bundled train split from four scripted policies, saved under ``meters/shipped/<name>``
with its held-out figures in ``meter.json`` (``heldout``). The tool envs have no meter of their
own: like the paper, which reuses its engineering-task meter, they get the AWM meter.
"""

from __future__ import annotations

from pathlib import Path

#: Env id -> folder under ``meters/shipped`` of the meter that ``load_meter(env_id)`` loads.
READY_METERS = {
    "ttg/ALFWorld-v0": "alfworld",
    "ttg/PaperSearchQA-v0": "papersearchqa",
    "ttg/AWM-v0": "awm",
    "ttg/BFCL-v0": "awm",
    "ttg/Tau2-v0": "awm",
}

SHIPPED = Path(__file__).parent / "shipped"


def ready_meter_path(env_id: str) -> Path:
    """The shipped meter folder for ``env_id``; a ``LookupError`` names what exists when there is none."""
    name = READY_METERS.get(env_id)
    path = SHIPPED / name if name else None
    if path is None or not (path / "meter.json").is_file():
        have = sorted(e for e, n in READY_METERS.items() if (SHIPPED / n / "meter.json").is_file())
        raise LookupError(f"no meter ships for {env_id!r}; shipped meters: {', '.join(have) or 'none'}")
    return path
