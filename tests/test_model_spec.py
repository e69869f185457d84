"""Model specs: local paths fail at once, hub ids fail fast offline, GGUF folders and files resolve."""

from __future__ import annotations

import pytest

from ttg_envs import model_spec
from ttg_envs.model_spec import ModelNotFoundError, looks_local, parse_model_spec, resolve_model


def test_options_come_from_the_query_string_and_keywords_win():
    location, opts = parse_model_spec("Qwen/Qwen3-4B?revision=abc&dtype=bfloat16", dtype="float32")
    assert location == "Qwen/Qwen3-4B" and opts == {"revision": "abc", "dtype": "float32"}
    with pytest.raises(ValueError, match="unknown model option 'revison'"):
        parse_model_spec("Qwen/Qwen3-4B?revison=abc")


@pytest.mark.parametrize(
    "spec, local",
    [
        ("no/such/dir", True),
        ("./x", True),
        ("/abs", True),
        ("~/m", True),
        ("model.gguf", True),
        ("Qwen/Qwen3-4B", False),
        ("gpt2", False),
        ("my_meter/meter", False),
    ],
)
def test_what_looks_like_a_path(spec, local):
    assert looks_local(spec) is local


@pytest.mark.parametrize("spec", ["no/such/dir", "./missing", "missing.gguf"])
def test_a_missing_local_path_fails_without_asking_the_hub(spec, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.setattr(hub, "model_info", lambda *a, **k: pytest.fail("the hub was asked"))
    with pytest.raises(ModelNotFoundError, match="not found"):
        resolve_model(spec)


def test_a_hub_id_with_hf_hub_offline_fails_without_a_request(monkeypatch, tmp_path):
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "model_info", lambda *a, **k: pytest.fail("the hub was asked"))
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE"):
        resolve_model("someone/some-model")


def test_an_unreachable_hub_is_one_request_and_names_the_local_path(monkeypatch, tmp_path):
    hub = pytest.importorskip("huggingface_hub")
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("Name or service not known")

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "model_info", refuse)
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model("my_meter/meter")
    assert len(calls) == 1
    assert "no local folder" in str(err.value) and str(tmp_path / "my_meter" / "meter") in str(err.value)
    assert "could not be reached" in str(err.value)


def test_gguf_folders_and_files_resolve(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert resolve_model(str(tmp_path)).gguf_file == "m.gguf"
    by_file = resolve_model(str(tmp_path / "m.gguf") + "?dtype=float32")
    assert (by_file.path, by_file.gguf_file, by_file.dtype) == (str(tmp_path), "m.gguf", "float32")
    (tmp_path / "n.gguf").write_bytes(b"GGUF")
    with pytest.raises(ValueError, match="several GGUF files"):
        resolve_model(str(tmp_path))
    assert resolve_model(f"{tmp_path}?gguf_file=n.gguf").gguf_file == "n.gguf"
    with pytest.raises(ModelNotFoundError, match="GGUF file not found"):
        resolve_model(f"{tmp_path}?gguf_file=o.gguf")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotFoundError, match="holds no model"):
        resolve_model(str(empty))


def test_load_meter_and_ttg_eval_say_not_found(tmp_path, monkeypatch, capsys):
    from ttg_envs.cli import main
    from ttg_envs.meters import load_meter

    monkeypatch.chdir(tmp_path)
    for spec in ("no/such/dir", "encoder:no/such/dir", "hf:no/such/dir"):
        with pytest.raises(ModelNotFoundError, match="not found"):
            load_meter(spec)
    assert main(["eval", "--meter", "no/such/dir", "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ttg: error: argument --meter: meter not found: 'no/such/dir'")


def test_cli_errors_are_one_line_with_exit_code_2(capsys):
    from ttg_envs.cli import main

    assert main(["rollout", "--env", "ttg/Nope-v0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ttg: error: argument --env: unknown env id 'ttg/Nope-v0' (choices: "
        "ttg/ALFWorld-v0, ttg/AWM-v0, ttg/BFCL-v0, ttg/PaperSearchQA-v0, ttg/Tau2-v0)"
    ]
    with pytest.raises(ValueError):
        main(["rollout", "--env", "ttg/Nope-v0", "--debug"])
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("ttg-envs ")


def test_cached_gguf_conversion_is_rebuilt_when_its_marker_is_wrong(tmp_path):
    marker = tmp_path / model_spec._COMPLETE
    assert not model_spec._complete(marker, "abc")
    marker.write_text('{"sha256": "abd"}')
    assert not model_spec._complete(marker, "abc")
    marker.write_text("{not json")
    assert not model_spec._complete(marker, "abc")
    marker.write_text('{"sha256": "abc"}')
    assert model_spec._complete(marker, "abc")


def test_a_count_of_zero_is_a_usage_error(capsys):
    from ttg_envs.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["rollout", "--limit", "0"])
    assert exit_.value.code == 2 and "must be at least 1, got 0" in capsys.readouterr().err


def test_progress_without_a_terminal_writes_plain_lines(capsys, monkeypatch):
    from ttg_envs.bars import progress_bar

    monkeypatch.setenv("TTG_PROGRESS_SECONDS", "0")
    with progress_bar(total=3, desc="record train", unit="ep") as bar:
        for _ in range(3):
            bar.update(1)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("record train: 3/3 ep, 100% |") and "\r" not in "".join(lines)
    assert len(lines) == len(set(lines)) >= 2


def test_progress_lines_stay_periodic_when_the_loop_sets_a_postfix(capsys, monkeypatch):
    from ttg_envs.bars import progress_bar

    monkeypatch.setenv("TTG_PROGRESS_SECONDS", "3600")
    with progress_bar(total=50, desc="encoder meter") as bar:
        for i in range(50):
            bar.update(1)
            bar.set_postfix(loss=f"{1 / (i + 1):.3f}")  # tqdm would refresh (write a line) on each
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) <= 3 and lines[-1].startswith("encoder meter: 50/50 it, 100% |"), lines


def test_a_single_seed_has_no_spread():
    from ttg_envs.eval.report import markdown_table

    row = {
        "actor": "a",
        "split": "s",
        "condition": "natural",
        "task_type": "all",
        "seeds": [0],
        "episodes": 4,
        "success_rate_mean": 0.5,
        "success_rate_std": 0.0,
        "avg_steps_mean": 3.0,
        "avg_steps_std": 0.0,
        "avg_tokens_mean": 10.0,
    }
    assert "| 50.0 ± n/a | 3.00 ± n/a |" in markdown_table([row])
    assert "| 50.0 ± 0.0 | 3.00 ± 0.00 |" in markdown_table([{**row, "seeds": [0, 1]}])


def test_a_model_load_prints_no_progress_bar_into_a_log(tmp_path, capsys):
    pytest.importorskip("transformers")
    from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["hello world, a tiny corpus"] * 5, vocab_size=300)
    model = tiny_causal_lm(tokenizer, hidden=16, layers=1, heads=2)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    capsys.readouterr()
    model_spec.load_causal_lm(f"hf:{tmp_path}")  # the actor spec's prefix is taken too
    assert "Loading weights" not in capsys.readouterr().err  # stderr is no terminal here
