"""Experiment trackers (``--report-to``): the names' grammar, the step line, and a real ``ttg train`` on
ALFWorld whose TensorBoard events and offline W&B run are read back by each tool's own reader."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest

from ttg_envs._optional import MissingExtraError
from ttg_envs.training.tracking import RunReporter, check_trackers, episode_rows, parse_report_to

#: What every actor-training step reports (the issue's list: success, reward, episode length, assistant
#: tokens, advantage spread, KL, entropy, learning rate, and the time split rollout / meter / update).
SCALARS = (
    "success_rate",
    "reward_mean",
    "turns_mean",
    "response_tokens",
    "episode_tokens_mean",
    "advantage_std",
    "kl",
    "entropy",
    "lr",
    "rollout_s",
    "meter_s",
    "update_s",
)


def test_report_to_reads_like_transformers():
    assert parse_report_to("tensorboard,wandb") == ("tensorboard", "wandb")
    assert parse_report_to(" wandb , tensorboard,wandb") == ("wandb", "tensorboard")
    assert parse_report_to(["tensorboard"]) == ("tensorboard",)
    assert parse_report_to("none") == () and parse_report_to(None) == () and parse_report_to("") == ()
    assert set(parse_report_to("all")) <= {"tensorboard", "wandb"}
    with pytest.raises(ValueError, match="unknown tracker mlflow"):
        parse_report_to("tensorboard,mlflow")
    with pytest.raises(ValueError):
        parse_report_to("none,wandb")


def test_a_missing_tracker_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(MissingExtraError, match=r"ttg-envs\[track\]"):
        check_trackers(["wandb"])


def test_ttg_train_reports_a_missing_tracker_in_one_line(monkeypatch, capsys):
    import importlib.util

    from ttg_envs.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    assert main(["train", "--model", "tiny", "--meter", "turns", "--report-to", "tensorboard", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'track' extra" in err[0]


class _Recorder:
    def __init__(self):
        self.logged, self.closed = [], False

    def log(self, scalars, step, tables=None):
        self.logged.append((step, dict(scalars), dict(tables or {})))

    def close(self):
        self.closed = True


class _Episode:
    def __init__(self, group, success):
        self.group, self.task_index, self.success, self.reward = group, group, success, float(success)
        self.actions, self.infos = [[1, 2], [3]], [{"task": {"id": f"t{group}"}}]

    @property
    def num_steps(self):
        return len(self.actions)


def test_reporter_logs_scalars_every_step_and_an_episode_table_every_n():
    tracker, out = _Recorder(), io.StringIO()
    reporter = RunReporter([tracker], table_every=2, table_rows=2, file=out)
    reporter.start(total=4, initial=0)
    episodes = [_Episode(0, True), _Episode(0, False), _Episode(1, False)]
    for step in (1, 2):
        reporter.step({"step": step, "success_rate": 0.5, "lr": 1e-6, "rollout_s": 2.0, "note": "text", "loss": float("nan")}, episodes)
    reporter.close()
    assert [s for s, _, _ in tracker.logged] == [1, 2] and tracker.closed
    assert tracker.logged[0][1] == {"train/success_rate": 0.5, "train/lr": 1e-6, "train/rollout_s": 2.0}
    assert tracker.logged[0][2] == {} and [r["task"] for r in tracker.logged[1][2]["episodes"]] == ["t0", "t1"]
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("ttg train: step 1/4, 25% | success 0.50, lr 1.0e-06 | rollout 2.0s")
    assert lines[1].endswith("left")


def test_episode_rows_take_one_episode_per_group_first():
    rows = episode_rows([_Episode(0, True), _Episode(0, False), _Episode(1, False)], n=3)
    assert [(r["group"], r["success"]) for r in rows] == [(0, True), (1, False), (0, False)]
    assert rows[0]["turns"] == 2 and rows[0]["tokens"] == 3 and rows[0]["last_action"] == ""


def _wandb_records(path: Path):
    """The records of a ``.wandb`` transaction log, parsed with wandb's own protobuf schema.

    wandb 0.31 ships no Python reader for the file (its Go core writes it): the container is
    leveldb's log format behind a 7-byte ``:W&B`` header, 32 KiB blocks of chunks (crc, length, type).
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            pos += room
            continue
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST chunk: one record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            buf = b""
            yield record


def test_ttg_train_on_alfworld_reports_to_tensorboard_and_offline_wandb(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("alfworld")
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ttg_envs.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    args = ["train", "--env", "ttg/ALFWorld-v0", "--model", "tiny", "--meter", "turns", "--tasks", "0-3", "--tasks-per-step", "1"]
    args += ["--group-size", "2", "--max-turns", "2", "--max-tokens-per-turn", "4", "--out", str(tmp_path)]
    args += ["--report-to", "tensorboard,wandb", "--log-episodes-every", "1"]
    assert main([*args, "--steps", "1"]) == 0
    assert main([*args, "--steps", "2"]) == 0  # resumes from checkpoint-1: the same W&B run continues
    err = capsys.readouterr().err
    assert "ttg train: step 2/2, 100% | success" in err and "rollout" in err and "left" in err
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(set(SCALARS) <= set(m) for m in metrics)

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    for name in SCALARS:
        logged = [(e.step, e.value) for e in events.Scalars(f"train/{name}")]
        assert logged == [(m["step"], pytest.approx(m[name], rel=1e-6, abs=1e-12)) for m in metrics], name
    assert {e.step for e in events.Tensors("episodes/text_summary")} == {1, 2}

    runs = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    run_id = (tmp_path / "wandb-run-id").read_text()
    assert runs and all(p.stem == f"run-{run_id}" for p in runs)
    history: dict[int, dict] = {}
    for path in runs:
        for record in _wandb_records(path):
            if record.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                history[items["_step"]] = items
    assert sorted(history) == [1, 2]
    for m in metrics:
        for name in SCALARS:
            assert history[m["step"]][f"train/{name}"] == pytest.approx(m[name], rel=1e-6, abs=1e-12), name
        assert history[m["step"]]["episodes/_type"] == "table-file" and history[m["step"]]["episodes/nrows"] == 2


def test_ttg_train_meter_reports_each_step_and_the_held_out_figures(tiny_game, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("alfworld")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ttg_envs.cli import main

    out = tmp_path / "run"
    args = ["train-meter", "--env-kwargs", json.dumps({"game_files": str(tiny_game)}), "--workers", "1", "--limit", "1"]
    args += ["--policies", "expert", "noisy_expert:0.5", "noisy_expert:1", "--epochs", "2", "--hidden", "16", "--batch-size", "1"]
    args += ["--val-fraction", "0.34", "--report-to", "tensorboard", "--out", str(out)]
    assert main(args) == 0
    report = json.loads((out / "train_report.json").read_text())
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    losses = [e.value for e in events.Scalars("encoder/loss")]
    assert len(losses) == report["train"]["steps"] == 4  # 2 trajectories, batch 1, 2 epochs
    assert losses[0] == pytest.approx(report["train"]["losses_first_last"][0]) and losses[-1] == pytest.approx(
        report["train"]["losses_first_last"][1]
    )
    assert [e.step for e in events.Scalars("encoder/lr")] == [1, 2, 3, 4]
    held = events.Scalars("held_out/completion_accuracy")
    assert [e.step for e in held] == [4] and held[0].value == pytest.approx(report["held_out"]["completion_accuracy"])
