"""The VQA bank builder against a fake Gemini server: selection, regeneration, audit trail, cache, CLI."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
from helpers.fake_gemini import FakeGemini, GenerateCall, Reply, questions_in

from worldrecall.engine.cli import main as cli_main
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.judges.gemini import GeminiJudge
from worldrecall.plugins.memobench.vqa.bank import BANK_COLUMNS, read_bank
from worldrecall.plugins.memobench.vqa.builder import BankBuildError, build_bank
from worldrecall.plugins.memobench.vqa.selection import tidy_generated

KEY = "wr-builder-key-55aa01"
DIMS = ["Instruction Following", "Object and Background", "Continuity of Memory", "Physics Adherence"]


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    import cv2

    d = tmp_path_factory.mktemp("media")
    rng = np.random.default_rng(5)
    first = d / "first.jpg"
    cv2.imwrite(str(first), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    ref = write_video(d / "gt.mp4", rng.integers(0, 255, (8, 48, 64, 3), dtype=np.uint8), 16)
    bad = write_video(d / "failure.mp4", rng.integers(0, 255, (8, 48, 64, 3), dtype=np.uint8), 16)
    sha = {
        k: hashlib.sha256(p.read_bytes()).hexdigest()
        for k, p in (("first", first), ("ref", ref), ("bad", bad))
    }
    return {"first": first, "ref": ref, "bad": bad, "sha": sha}


class Scenario:
    """A scripted judge: 24 questions; reference fails IDs in ``ref_fail``; on the failure video the hint
    flips the verdict of questions whose text is in ``flip`` (matched by a predicate)."""

    def __init__(
        self, media, ref_fail=(1, 7), flip=lambda q: q["ID"] in (2, 13, 14, 15), version=lambda t: ""
    ):
        self.media, self.ref_fail, self.flip, self.version = media, set(ref_fail), flip, version
        self.gen_calls = 0

    def __call__(self, call: GenerateCall) -> Reply:
        if "design evaluation questions" in call.system:
            self.gen_calls += 1
            assert call.media_sha256 == self.media["sha"]["first"] and call.media_mime == "image/jpeg"
            tag = self.version(call.text)
            items = [
                {
                    "ID": i + 1,
                    "Dimension": DIMS[i // 6],
                    "Dimension Polarity": "Positive" if i % 2 == 0 else "Negative",
                    "Question": f"Question {i + 1}{tag}?",
                }
                for i in range(24)
            ]
            return Reply(text=json.dumps(items))
        qs = questions_in(call.text)
        hinted = "A note from a human reviewer" in call.text
        out = []
        for q in qs:
            if call.media_sha256 == self.media["sha"]["ref"]:
                verdict = "Fail" if q["ID"] in self.ref_fail else "Pass"
            else:
                verdict = "Pass" if (hinted and self.flip(q)) else "Fail"
            positive = q["Dimension Polarity"] == "Positive"
            answer = "Yes" if (verdict == "Pass") == positive else "No"
            out.append({**q, "Answer": answer, "Verdict": verdict, "Reasoning": "scripted"})
        return Reply(text=json.dumps(out))


def judge(fake, cache):
    return GeminiJudge(
        {"base_url": fake.base_url, "cache_dir": str(cache), "model_id": "gemini-3-flash-preview"},
        api_key=KEY,
    )


def build(j, media, out, **kw):
    return build_bank(
        j,
        scene="Zen_Garden",
        video_id=10,
        prompt="a fox runs right",
        first_frame=media["first"],
        reference_video=media["ref"],
        failure_video=media["bad"],
        hint='"The fox jumps."',
        out_dir=out,
        **kw,
    )


def test_build_selects_like_the_official_recipe(media, tmp_path):
    sc = Scenario(media)
    with FakeGemini(KEY, sc) as fake:
        res = build(judge(fake, tmp_path / "cache"), media, tmp_path / "out")
        calls = fake.generate_calls
    # 24 generated; reference drops 1 and 7; hint flips 2, 13, 14, 15 -> 18 final
    # per dimension: IF 6-2 = 4, OB 6-1 = 5, CM 6-3 = 3, PA 6
    assert res.attempts == 1 and calls == 4
    assert [q["ID"] for q in res.final] == [3, 4, 5, 6, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20, 21, 22, 23, 24]
    assert res.counts == {DIMS[0]: 4, DIMS[1]: 5, DIMS[2]: 3, DIMS[3]: 6}
    bank = read_bank(res.bank_path)  # the official format, readable by the metric
    assert res.bank_path.name == "Zen_Garden-10-questions.csv"
    assert [q["ID"] for q in bank.questions] == [q["ID"] for q in res.final]
    c = bank.columns
    assert len(c["Start Questions"]) == 24 and len(c["Evaluation on ground truth"]) == 24
    assert len(c["Evaluation on failure"]) == 22 == len(c["Revised Evaluation on failure"])
    assert set(c["Evaluation on ground truth"][0]) == {
        "ID",
        "Dimension",
        "Dimension Polarity",
        "Question",
        "Answer",
        "Verdict",
        "Reasoning",
    }
    with open(res.bank_path, newline="") as f:
        assert next(csv.reader(f)) == BANK_COLUMNS
    # every step's inputs and outputs are on disk
    steps = sorted(p.name for p in (res.audit_dir / "attempt-1").iterdir())
    assert steps == [
        "01_generate.json",
        "02_reference.json",
        "03_failure.json",
        "04_failure_hinted.json",
        "05_select.json",
    ]
    hinted = json.loads((res.audit_dir / "attempt-1" / "04_failure_hinted.json").read_text())
    assert (
        "The fox jumps." in hinted["inputs"]["prompt"]
        and hinted["inputs"]["model_id"] == "gemini-3-flash-preview"
    )
    assert len(hinted["outputs"]["answers"]) == 22
    summary = json.loads((res.audit_dir / "build.json").read_text())
    assert summary["bank"] == res.bank_path.name and summary["attempts"][0]["final"] == 18


def test_rebuild_costs_no_calls_and_is_identical(media, tmp_path):
    with FakeGemini(KEY, Scenario(media)) as fake:
        first = build(judge(fake, tmp_path / "cache"), media, tmp_path / "a").bank_path.read_bytes()
        n = fake.generate_calls
        again = build(judge(fake, tmp_path / "cache"), media, tmp_path / "b").bank_path.read_bytes()
        assert fake.generate_calls == n and first == again


def test_short_dimension_regenerates_with_a_new_prompt(media, tmp_path):
    # attempt 1: the hint flips 5 of 6 CM questions -> 1 left (< 2); attempt 2's questions ("v2") hold up
    sc = Scenario(
        media,
        flip=lambda q: 13 <= q["ID"] <= 17 and "v2" not in q["Question"],
        version=lambda text: " v2" if "attempt 2" in text else "",
    )
    with FakeGemini(KEY, sc) as fake:
        res = build(judge(fake, tmp_path / "cache"), media, tmp_path / "out")
    assert res.attempts == 2 and sc.gen_calls == 2
    assert all("v2" in q["Question"] for q in res.final)
    first = json.loads((res.audit_dir / "attempt-1" / "05_select.json").read_text())
    assert first["short_dimensions"] == ["Continuity of Memory"]
    regen = json.loads((res.audit_dir / "attempt-2" / "01_generate.json").read_text())
    assert "Continuity of Memory" in regen["inputs"]["prompt"]


def test_attempts_are_bounded(media, tmp_path):
    sc = Scenario(media, flip=lambda q: q["Dimension"] == "Physics Adherence")  # PA never survives
    with FakeGemini(KEY, sc) as fake:
        with pytest.raises(BankBuildError, match=r"after 2 attempts, dimension\(s\) Physics Adherence"):
            build(judge(fake, tmp_path / "cache"), media, tmp_path / "out", max_attempts=2)
    assert sc.gen_calls == 2
    assert not (tmp_path / "out" / "Zen_Garden-10-questions.csv").exists()
    assert (
        json.loads((tmp_path / "out" / "audit" / "Zen_Garden-10" / "build.json").read_text())["bank"] is None
    )


def test_answer_pass_rule_uses_polarity():
    # generated items: unknown dimension / polarity / empty text are dropped; at most n per dimension kept
    items = [
        {"Dimension": DIMS[0], "Dimension Polarity": "positive", "Question": "a"},
        {"Dimension": "Other", "Dimension Polarity": "Positive", "Question": "b"},
        {"Dimension": DIMS[0], "Dimension Polarity": "Sideways", "Question": "c"},
        {"Dimension": DIMS[2], "Dimension Polarity": "Negative", "Question": "  d  "},
        {"Dimension": DIMS[0], "Dimension Polarity": "Negative", "Question": "e"},
        {"Dimension": DIMS[0], "Dimension Polarity": "Negative", "Question": "f"},
    ]
    out = tidy_generated(items, per_dimension=2)
    assert out == [
        {"ID": 1, "Dimension": DIMS[0], "Dimension Polarity": "Positive", "Question": "a"},
        {"ID": 2, "Dimension": DIMS[0], "Dimension Polarity": "Negative", "Question": "e"},
        {"ID": 3, "Dimension": DIMS[2], "Dimension Polarity": "Negative", "Question": "d"},
    ]


def test_cli(media, tmp_path, monkeypatch, capsys):
    fc = tmp_path / "failure-cases.csv"
    with open(fc, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scene", "video_id", "hint", "folder", "Finished", "prompt"])
        w.writerow(["Zen_Garden", 10, '"The fox jumps."', "ZenGarden_010", "Yes", "a fox runs right"])
    args = [
        "--out",
        str(tmp_path / "out"),
        "--first-frame",
        str(media["first"]),
        "--reference",
        str(media["ref"]),
        "--failure",
        str(media["bad"]),
        "--failure-cases",
        str(fc),
        "--folder",
        "ZenGarden_010",
    ]
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    # through the CLI, as users run it: `worldrecall vqa-bank …` is the memobench_vqa plugin's command
    assert cli_main(["vqa-bank", *args]) == 2 and "GEMINI_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    with FakeGemini(KEY, Scenario(media)) as fake:
        assert cli_main(["vqa-bank", *args, "--base-url", fake.base_url]) == 0
        assert {c.model for c in fake.calls} == {"gemini-3-flash-preview"}
    assert "Zen_Garden-10-questions.csv (18 questions" in capsys.readouterr().out
    assert read_bank(tmp_path / "out" / "Zen_Garden-10-questions.csv").video_id == 10
    assert (tmp_path / "out" / "judge_cache").is_dir()
    for p in (tmp_path / "out").rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes()


def test_bank_command_is_registered_and_kept_apart_from_the_builder(capsys):
    """The builder holds the recipe, ``vqa/command.py`` the command line; ``worldrecall vqa-bank`` (the
    memobench_vqa plugin's registered command) still gets every builder argument."""
    from worldrecall.plugins.memobench.vqa import builder, command

    assert not hasattr(builder, "argparse") and not hasattr(builder, "run_builder")
    assert command.build_bank is build_bank
    with pytest.raises(SystemExit) as exc:
        cli_main(["vqa-bank", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--first-frame", "--failure-cases", "--pass-rule", "--judge"):
        assert flag in out
