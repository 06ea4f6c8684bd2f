"""The ``language`` axis (issue 24 §3): a prompted ``remote:`` policy gets each episode's
rewritten instruction (a real policy server logs what it received); the rewrite is recorded
per episode; a policy without a prompt is flagged "not observed by this policy"."""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

import numpy as np
import pytest

from robogen.configs import load_eval_config
from robogen.perturbations import make_axis
from robogen.perturbations.language import LanguagePerturbation, prompt_edits
from robogen.perturbations.wrapper import axis_rng
from robogen.reports.records import STATUS_NOT_OBSERVED, STATUS_OK
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate
from tests.test_serve import FIXTURE, Server, servers  # noqa: F401 - the servers fixture

PROMPT = "pick the red block and place it on the target"


def test_an_edit_rewrites_words_wraps_and_appends():
    p = LanguagePerturbation(template="could you {prompt}?", synonyms=(("pick", "grab"),),
                             clauses=("ignore the blue cup",))
    assert (p.edit_prompt("Pick the red block")
            == "could you grab the red block?; ignore the blue cup")
    assert p.edit_prompt("unpicked") == "could you unpicked?; ignore the blue cup"  # whole words


def test_every_level_edits_and_more_with_severity():
    axis = make_axis("language")

    def edits(severity: float) -> list[int]:
        out = []
        for seed in range(200):
            p = axis.sample(axis_rng(seed, "language"), severity, "all", None)
            assert p.edit_prompt(PROMPT) != PROMPT  # every episode of a level > 0 is edited
            out.append(bool(p.template) + len(p.synonyms) + len(p.clauses))
        return out

    low, high = edits(0.2), edits(1.0)
    assert np.mean(low) < np.mean(high)
    test = axis.sample(axis_rng(3, "language"), 1.0, "test", None)
    assert test.template in prompt_edits()["templates"]["test"]
    assert all(c in prompt_edits()["clauses"]["test"] for c in test.clauses)


def test_a_prompted_remote_policy_gets_each_episodes_rewritten_prompt(tmp_path, servers):  # noqa: F811
    s = Server([sys.executable, FIXTURE, "--act-dim", "6", "--log"])
    servers.append(s)
    cfg = load_eval_config(None, env="robogen/Reach-v0",
                           policy=f"remote:{s.url}?prompt={quote(PROMPT)}",
                           axes=["language"], severities=[1.0], combined=False, episodes=4,
                           batch_size=2, max_steps=3, seed=0, backend="serial", videos=0,
                           out=tmp_path / "r")
    evaluate(cfg)
    results = ResultStore.open(tmp_path / "r").load_results()
    assert all(r.cause in (None, "timeout") for r in results), [r.error for r in results]
    sent = {ln.split(": ", 1)[1].strip() for ln in s.lines if ln.startswith("prompt ")}
    rewritten = set()
    for r in results:
        if r.condition == "nominal":
            continue
        (rec,) = json.loads(r.perturbations_json)
        p = LanguagePerturbation(**{k: tuple(map(tuple, v)) if k == "synonyms" else
                                    (tuple(v) if isinstance(v, list) else v)
                                    for k, v in rec["values"].items()})
        assert rec["applied"]["prompt"] == p.edit_prompt(PROMPT) != PROMPT
        rewritten.add(rec["applied"]["prompt"])
    assert PROMPT in sent  # the probe and the nominal episodes
    assert rewritten and rewritten <= sent  # the server got every episode's rewrite
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["manifest"]["policy_inputs"] == ["observation", "prompt"]
    (gap,) = [g for g in report["gaps"] if g["axis"] == "language"]
    assert gap["status"] == STATUS_OK


def test_a_policy_without_a_prompt_does_not_observe_the_language_axis(tmp_path):
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach",
                           axes=["language", "physics"], severities=[1.0], combined=False,
                           episodes=4, batch_size=2, max_steps=20, seed=0, backend="serial",
                           videos=0, out=tmp_path / "r")
    evaluate(cfg)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    gaps = {g["axis"]: g for g in report["gaps"]}
    assert gaps["language"]["status"] == STATUS_NOT_OBSERVED
    assert "takes no instruction" in gaps["language"]["note"]
    assert gaps["language"]["gap"] == 0.0
    assert gaps["physics"]["status"] == STATUS_OK


@pytest.mark.parametrize("bad", ["langauge"])
def test_a_misspelt_axis_is_exit_2_naming_the_close_match(tmp_path, bad):
    from typer.testing import CliRunner

    from robogen.cli import app

    res = CliRunner().invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy",
                                   "expert:reach", "--axes", bad, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "did you mean 'language'" in " ".join(res.output.split())
    assert not (tmp_path / "x").exists()
