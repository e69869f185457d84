"""ttg/PaperSearchQA-v0: Search-R1 protocol, exact-match reward, bundle properties, real-format loading, branching."""

from __future__ import annotations

import gzip
import hashlib
import json
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttg_envs.datagen.papersearchqa import write_bundle
from ttg_envs.envs.papersearchqa import (
    PaperSearchQAEnv,
    exact_match,
    load_tasks,
    normalize_answer,
    parse_search_action,
)
from ttg_envs.envs.papersearchqa.data import BUNDLED_DATA_DIR
from ttg_envs.envs.papersearchqa.policies import make_policy
from ttg_envs.retrieval import load_corpus, make_retriever
from ttg_envs.retrieval.server import RetrievalServer
from ttg_envs.wrappers import branch

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def env():
    env = gym.make("ttg/PaperSearchQA-v0", split="test")
    yield env
    env.close()


def _rows(name: str) -> list[dict]:
    with gzip.open(BUNDLED_DATA_DIR / name, "rt") as f:
        return [json.loads(line) for line in f]


def _play(env, policy, index: int):
    env.reset(options={"task_index": index})
    steps = []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(env))
        steps.append((obs, reward, info["state_key"], info["success"]))
        if terminated or truncated:
            return steps


# ----------------------------------------------------------------- the bundle
def test_bundle_regenerates_byte_identically(tmp_path):
    manifest = json.loads((BUNDLED_DATA_DIR / "MANIFEST.json").read_text())
    hashes = write_bundle(tmp_path, seed=manifest["seed"])
    assert hashes == manifest["sha256"]
    for name, sha in hashes.items():
        assert hashlib.sha256((BUNDLED_DATA_DIR / name).read_bytes()).hexdigest() == sha
    assert write_bundle(tmp_path / "other", seed=1) != hashes


def test_bundle_is_answerable_only_by_searching():
    corpus = {d["id"]: d["contents"] for d in _rows("corpus.jsonl.gz")}
    lookup = json.loads((BUNDLED_DATA_DIR / "pubmed-lookupPMID.json").read_text())
    assert len(corpus) >= 2000 and all(c.startswith("TITLE: ") and ". ABSTRACT: " in c for c in corpus.values())
    test = load_tasks("test")
    assert (sum(t.subset == "original" for t in test), sum(t.subset == "paraphrased" for t in test)) == (300, 300)
    for row in _rows("test.jsonl.gz") + _rows("train.jsonl.gz"):
        source = corpus[lookup[row["pmid"]]]
        assert row["answer"] in source and row["paper_title"] in source
        assert not any(normalize_answer(a) in normalize_answer(row["question"]) for a in row["golden_answers"])


def test_bm25_finds_the_source_and_paraphrases_are_harder():
    tasks = load_tasks("test")
    lookup = json.loads((BUNDLED_DATA_DIR / "pubmed-lookupPMID.json").read_text())
    retriever = PaperSearchQAEnv("test").retriever
    top1 = {"original": 0, "paraphrased": 0}
    with_distractor = 0
    for task in tasks:
        hits = retriever.search(task.question, 3)
        assert str(lookup[task.pmid]) in [h.document.id for h in hits]
        top1[task.subset] += hits[0].document.id == str(lookup[task.pmid])
        # The other passages name the same subject with a wrong answer: the agent must read.
        with_distractor += any(task.answers[0] not in h.document.contents for h in hits)
    assert top1["paraphrased"] < top1["original"] < 300
    assert with_distractor == len(tasks)


# ----------------------------------------------------------------- scoring and parsing
@pytest.mark.parametrize(
    "pred, golden, ok",
    [
        ("The HBB gene.", ["HBB gene"], True),
        ("  dystrophin ", ["DMD protein", "Dystrophin"], True),
        ("an  Adrenal Glands", ["adrenal glands"], True),
        ("5p15.3", ["5p153"], True),
        ("HBA", ["HBB"], False),
        ("", ["x"], False),
    ],
)
def test_exact_match_after_squad_normalisation(pred, golden, ok):
    assert exact_match(pred, golden) is ok


@given(st.text())
def test_normalisation_is_idempotent(text):
    assert normalize_answer(normalize_answer(text)) == normalize_answer(text)


@pytest.mark.parametrize(
    "text, command",
    [
        ("<think>x</think><search> BRV1 kinase </search>", ("search", "BRV1 kinase")),
        ("<ANSWER>HBB</ANSWER>", ("answer", "HBB")),
        ("<search>first</search> then <answer>late</answer>", ("search", "first")),
        ("<answer>a\n b</answer><search>q</search>", ("answer", "a b")),
    ],
)
def test_parse_takes_the_first_complete_block(text, command):
    assert parse_search_action(text).command == command


@pytest.mark.parametrize(
    "text, why",
    [
        ("just words", "no <search>"),
        ("<search>unclosed", "not closed with </search>"),
        ("<answer> </answer>", "<answer> block is empty"),
        ("<search>" + "x " * 3000 + "</search>", "longer than"),
    ],
)
def test_parse_says_what_was_wrong(text, why):
    parsed = parse_search_action(text)
    assert parsed.command is None and why in parsed.error


# ----------------------------------------------------------------- the env
def test_search_then_answer_protocol(env):
    base = env.unwrapped
    obs, info = env.reset(options={"task_index": 0})
    task = base.current_task
    assert obs == f"Question: {task.question}" and info["task"]["type"] == "original"
    assert "answer" not in json.dumps(info["task"]).lower().replace("answered", "")
    obs, reward, terminated, truncated, info = env.step(f"<search>{task.question}</search>")
    assert obs.startswith("<information>Doc 1(Title: TITLE: ") and obs.endswith("\n</information>")
    assert obs.count("Doc ") == 3 and len(info["retrieved_ids"]) == 3 and reward == 0 and not terminated
    assert base.messages[-1] == {"role": "user", "content": obs}
    obs, reward, terminated, _, info = env.step(f"<answer>the {task.answers[-1].upper()}.</answer>")
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    env.reset(options={"task_index": 0})
    *_, info = env.step("<answer>HBB</answer>")
    assert info["success"] is False and info["action_valid"] is True


def test_truncated_after_six_turns_and_invalid_turns_count(env):
    env.reset(options={"task_index": 1})
    outs = [env.step("I think the answer is HBB")[1:] for _ in range(6)]
    assert [o[2] for o in outs] == [False] * 5 + [True]
    assert not outs[-1][1] and "no <search>" in outs[0][3]["error"] and not outs[0][3]["action_valid"]
    with pytest.raises(Exception, match="reset"):
        env.step("<answer>x</answer>")


def test_empty_search_result_is_an_empty_information_block(env):
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step("<search>the of and a</search>")
    assert obs == "<information></information>" and info["retrieved_ids"] == []


def test_expert_solves_everything_and_noisy_expert_varies():
    env = PaperSearchQAEnv("test", subset="paraphrased")
    expert = make_policy("expert")
    assert all(_play(env, expert, i)[-1][3] for i in range(env.num_tasks))
    noisy = make_policy("noisy_expert", seed=0, eps=0.5)
    runs = [_play(env, noisy, i) for i in range(60)]
    assert 0 < sum(r[-1][3] for r in runs) < 60 and len({len(r) for r in runs}) >= 3
    with pytest.raises(ValueError, match="unknown PaperSearchQA policy"):
        make_policy("oracle")


def test_task_order_and_seeds_are_deterministic():
    a, b = PaperSearchQAEnv("train"), PaperSearchQAEnv("train")
    assert [t.id for t in a.tasks] == [f"train-{i:05d}" for i in range(700)]
    assert [a.reset(seed=s)[0] for s in range(5)] == [b.reset(seed=s)[0] for s in range(5)]
    assert {t.subset for t in PaperSearchQAEnv("test", subset="original").tasks} == {"original"}


def test_check_env_passes_without_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(PaperSearchQAEnv("test"), skip_render_check=True)
    assert [str(w.message) for w in caught] == []


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=300),
        st.sampled_from(["<search>", "</search>", "<answer></answer>", "<answer>"]),
        st.builds(lambda s: f"<search>{s}</search>", st.text(max_size=60)),
        st.builds(lambda s: f"<answer>{s}</answer>", st.text(max_size=20)),
    )
)
def test_arbitrary_strings_raise_nothing(env, text):
    if env.unwrapped.task is None or env.unwrapped.done:
        env.reset(seed=0)
    obs, reward, _, _, info = env.step(text)
    assert isinstance(obs, str) and obs and reward in (0.0, 1.0)
    if not info["action_valid"]:
        assert info["error"] in obs


_ACTIONS = st.lists(
    st.sampled_from(
        [
            "<search>BRV1 kinase</search>",
            "<search>syndrome gene mutated</search>",
            "<search>trial drug reduced</search>",
            "no tags",
            "<answer>HBB</answer>",
        ]
    ),
    max_size=4,
)


@SETTINGS
@given(prefix=_ACTIONS, suffix=_ACTIONS, method=st.sampled_from(["snapshot", "replay"]))
def test_branch_future_equals_original(env, prefix, suffix, method):
    env.reset(options={"task_index": 3})
    for action in prefix:
        if env.step(action)[2] or env.unwrapped.done:
            return
    child = branch(env, method)
    assert child.unwrapped.messages == env.unwrapped.messages
    for action in suffix:
        if env.unwrapped.done:
            break
        a, b = child.step(action), env.step(action)
        assert (a[0], a[1], a[2], a[3], a[4]["state_key"]) == (b[0], b[1], b[2], b[3], b[4]["state_key"])


def test_state_key_is_the_knowledge_state(env):
    base = env.unwrapped
    env.reset(options={"task_index": 2})
    start = base._state_key()
    env.step("no tags")
    assert base._state_key() == start
    *_, first = env.step("<search>BRV1 kinase</search>")
    *_, again = env.step("<search>BRV1 kinase</search>")
    assert first["state_key"] == again["state_key"] != start


# ----------------------------------------------------------------- real-format files and other backends
REAL_ROWS = [
    {
        "question": "What gene is mutated in Sickle Cell Anemia?",
        "answer": "HBB",
        "golden_answers": ["HBB", "beta-globin"],
        "question_original": "What gene is mutated in Sickle Cell Anemia?",
        "pmid": "1",
        "paper_title": "t",
        "cat_num": "1",
        "cat": "Genetic inheritance & disease-linked mutations",
    },
    {
        "question": "Sickle cell anaemia results from mutations in which gene?",
        "answer": "HBB",
        "golden_answers": ["HBB"],
        "question_original": "What gene is mutated in Sickle Cell Anemia?",
        "pmid": "1",
        "paper_title": "t",
        "cat_num": "1",
        "cat": "Genetic inheritance & disease-linked mutations",
    },
    {"question": "Where is corticosterone synthesized?", "answer": "Adrenal glands", "golden_answers": None, "pmid": "2"},
]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_released_question_files_load_with_subsets(tmp_path, fmt):
    path = tmp_path / f"test-00000-of-00001.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(REAL_ROWS), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in REAL_ROWS))
    tasks = load_tasks("test", questions=path)
    assert [(t.id, t.subset) for t in tasks] == [("test-00000", "original"), ("test-00001", "paraphrased"), ("test-00002", "original")]
    assert tasks[0].answers == ("HBB", "beta-globin") and tasks[2].answers == ("Adrenal glands",)
    assert [t.id for t in load_tasks("test", questions=path, subset="paraphrased")] == ["test-00001"]


def test_env_on_user_files_with_tantivy_and_http(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in REAL_ROWS))
    corpus = tmp_path / "pubmed.jsonl"
    corpus.write_text(
        json.dumps({"id": 0, "contents": "TITLE: HBB mutations cause sickle cell anemia. ABSTRACT: ..."})
        + "\n"
        + json.dumps(
            {"id": 1, "contents": "TITLE: Adrenal steroidogenesis. ABSTRACT: corticosterone is synthesized in the adrenal glands."}
        )
        + "\n"
    )
    env = PaperSearchQAEnv("test", questions=questions, corpus=corpus, retriever="tantivy")
    env.reset(options={"task_index": 2})
    *_, info = env.step("<search>corticosterone synthesized</search>")
    assert info["retrieved_ids"][0] == "1"
    local = make_retriever("bm25s", corpus=load_corpus(corpus, progress=False), cache_dir=tmp_path, progress=False)
    with RetrievalServer(local, port=0) as server:
        remote = PaperSearchQAEnv("test", questions=questions, retriever="http", retriever_kwargs={"url": server.url}, topk=1)
        remote.reset(options={"task_index": 0})
        obs, *_ = remote.step("<search>sickle cell gene</search>")
        assert obs == "<information>Doc 1(Title: TITLE: HBB mutations cause sickle cell anemia. ABSTRACT: ...) \n</information>"
