"""Workload files: the shipped ones, the schema, user edits end to end, bad input, and the manifest round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_fastgen
from fastgen.generator.scenarios import default_spec
from fastgen.errors import WorkloadError
from fastgen.generator.workload import (
    SCHEMA_PATH,
    WORKLOADS_DIR,
    load_workload,
    parse_workload,
    workload_schema,
    workload_yaml,
)

QUIET = ["--tokenizer", "builtin", "--quiet", "--workers", "1"]


def _paths(root: Path) -> list[str]:
    return ["--output-dir", str(root / "traces"), "--config-dir", str(root / "configs")]


def _spans(path: Path) -> list[dict]:
    return json.loads(path.read_bytes())["spans"]


def test_shipped_default_is_the_benchmarks_numbers_and_loads_back_equal():
    text = (WORKLOADS_DIR / "default.yaml").read_text()
    # generated from the scenarios' own defaults: regenerate with workload_yaml(default_spec()) when they change
    assert text == workload_yaml(default_spec())
    assert load_workload(WORKLOADS_DIR / "default.yaml") == default_spec()


def test_committed_json_schema_is_the_one_the_model_gives():
    # stale when a spec field changes: rewrite it with workload_schema() (json.dumps(..., indent=1, sort_keys=True))
    assert json.loads(SCHEMA_PATH.read_text()) == workload_schema()
    props = workload_schema()["$defs"]["Scenario1Spec"]["properties"]
    assert props["repo_map"]["minimum"] == 0 and props["sessions"]["minimum"] == 1
    assert workload_schema()["$defs"]["Scenario1Spec"]["additionalProperties"] is False


def test_workload_show_applies_the_scales_and_loads_back(tmp_path):
    shown = run_fastgen("workload", "show", "--scale", "0.5", "--budget-scale", "0.5", "--max-model-len", "65536")

    assert shown.returncode == 0, shown.stderr
    doc = yaml.safe_load(shown.stdout)
    assert doc["max_model_len"] == 65536 and doc["scenarios"]["scenario1"]["sessions"] == 50
    assert doc["scenarios"]["scenario1"]["repo_map"] == 20000
    (tmp_path / "w.yaml").write_text(shown.stdout)
    assert load_workload(tmp_path / "w.yaml").scenario1.repo_map == 20000


def test_a_user_workload_sets_counts_budgets_levels_and_scenarios(tmp_path):
    doc = yaml.safe_load(run_fastgen("workload", "show", "--budget-scale", "0.05").stdout)
    del doc["scenarios"]["scenario1"]  # only scenarios 2 and 3
    s2, s3 = doc["scenarios"]["scenario2"], doc["scenarios"]["scenario3"]
    s2.update(sets=3, root_prompt={"lo": 5000, "hi": 7000}, branch_output={"lo": 100, "hi": 150}, concurrency=[2, 3])
    s3.update(sessions=4, modules=2, concurrency=[4], arrival_window_s=30)
    workload = tmp_path / "mine.yaml"
    workload.write_text(yaml.safe_dump(doc, sort_keys=False))

    # budgets are in content tokens: counted by content, the roots land on the range's ends exactly
    result = run_fastgen(*QUIET, "--workload", str(workload), "--count", "content", *_paths(tmp_path))

    assert result.returncode == 0, result.stderr
    traces = tmp_path / "traces"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == [
        "scenario2_stagger",
        "scenario2_sync",
        "scenario3_noisy",
        "scenario3_stable",
        "tokenizer",
    ]
    assert len(list((traces / "scenario2_sync").glob("*.json"))) == 3
    assert len(list((traces / "scenario3_stable").glob("*.json"))) == 4
    roots = [
        _spans(p)[0]["attributes"]["gen_ai.usage.input_tokens"]
        for p in sorted((traces / "scenario2_sync").glob("*.json"))
    ]
    assert roots[0] == 5000 and roots[-1] == 7000 and roots == sorted(roots)  # spread over the range, exactly
    outputs = [
        s["attributes"]["gen_ai.usage.output_tokens"]
        for p in (traces / "scenario2_sync").glob("*.json")
        for s in _spans(p)[1:]
    ]
    assert all(100 <= n <= 150 for n in outputs), outputs
    configs = sorted(p.relative_to(tmp_path / "configs").as_posix() for p in (tmp_path / "configs").rglob("*.yml"))
    assert configs == [
        "scenario2/c2_stagger.yml",
        "scenario2/c2_sync.yml",
        "scenario2/c3_stagger.yml",
        "scenario2/c3_sync.yml",
        "scenario3/c4_noisy.yml",
        "scenario3/c4_stable.yml",
    ]
    stage = yaml.safe_load((tmp_path / "configs" / "scenario3" / "c4_stable.yml").read_text())["load"]["stages"][0]
    assert stage["num_sessions"] == 4 and stage["session_rate"] == pytest.approx(4 / 30)
    validated = run_fastgen("validate", str(traces))
    assert validated.returncode == 0, validated.stdout
    manifest = json.loads((traces / "manifest.json").read_bytes())
    assert manifest["workload"]["scenarios"]["scenario2"]["sets"] == 3
    assert "scenario1" not in manifest["workload"]["scenarios"]


def test_from_manifest_regenerates_the_same_bytes(tmp_path):
    first = run_fastgen(*QUIET, "--workload", "smoke", "--seed", "9", "--compress", "zstd", *_paths(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    manifest = tmp_path / "a" / "traces" / "manifest.json"

    again = run_fastgen(
        "--tokenizer", "builtin", "--seed", "9", "--from-manifest", str(manifest), *_paths(tmp_path / "b")
    )
    # --tokenizer may name the same tokenizer elsewhere: it is checked by its hash
    regenerated = run_fastgen(
        "--quiet", "--tokenizer", "builtin", "--from-manifest", str(manifest), *_paths(tmp_path / "b")
    )

    assert again.returncode == 2 and "drop --seed" in again.stderr
    assert regenerated.returncode == 0, regenerated.stderr
    assert (tmp_path / "b" / "traces" / "manifest.json").read_bytes() == manifest.read_bytes()
    assert run_fastgen("verify", str(tmp_path / "b" / "traces"), "--manifest", str(manifest)).returncode == 0


def test_the_32k_workload_fits_every_request_in_32768_tokens(tmp_path):
    result = run_fastgen(*QUIET, "--workload", "32k", "--scale", "0.1", *_paths(tmp_path))

    assert result.returncode == 0, result.stderr
    worst = 0
    for path in (tmp_path / "traces").glob("scenario*/*.json"):
        for span in _spans(path):
            a = span["attributes"]
            tool_call = '"tool_call"' in a["gen_ai.output.messages"]
            sent = max(4 * a["gen_ai.usage.output_tokens"], 4096) if tool_call else a["gen_ai.usage.output_tokens"]
            worst = max(worst, a["gen_ai.usage.input_tokens"] + sent)
    assert 24000 < worst <= 32768  # template counts: the prompt the server renders, plus the max_tokens it is sent
    assert run_fastgen("validate", str(tmp_path / "traces")).returncode == 0


@pytest.mark.parametrize(
    "text, says",
    [
        ("scenarios: {scenario1: {repo_map: 40k}}", 'scenarios.scenario1.repo_map: expected an integer, got "40k"'),
        ("scenarios: {scenario1: {repo_mapp: 4}}", "scenarios.scenario1.repo_mapp: unknown key"),
        ("scenarios: {scenario1: {sessions: -3}}", "scenarios.scenario1.sessions: expected an integer >= 1, got -3"),
        ("scenarios: {scenario1: {sessions: 1000000000}}", "expected an integer <= 1000000"),
        ("scenarios: {scenario2: {bug_report: {lo: 9, hi: 1}}}", "scenarios.scenario2.bug_report: range 9..1 is empty"),
        ("scenarios: {}", "scenarios lists no scenario"),
        ("scenarios: {scenario7: {}}", "scenarios.scenario7: no such scenario"),
        ("format: 2\nscenarios: {scenario2: {}}", "written by a newer fastgen (workload format 2"),
        ("scenarios:\n  scenario2: {sets: [\n", "line 3, column 1: not valid YAML"),
        (
            "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\nscenarios: {scenario2: {}}",
            "anchors and aliases are not allowed",
        ),
        ("max_model_len: 20000\nscenarios: {scenario1: {}}", "scenario 1 turn 5 can need"),
        ("- just\n- a list\n", "a workload is a mapping"),
        (
            "scenarios: {scenario3: {shared_workspace_percent: {lo: 0, hi: 40}}}",
            "scenarios.scenario3: shared_workspace_percent must lie within 1..100, got {lo: 0, hi: 40}",
        ),
        ("scenarios: {scenario3: {turns: {lo: 0, hi: 0}}}", "scenarios.scenario3: turns must be at least 1"),
        ("scenarios: {scenario2: {branch_output: {lo: 0, hi: 5}}}", "branch_output must be at least 1 token"),
        ("scenario: {}\nscenarios: {scenario2: {}}", "scenario: unknown key"),
        # the root's fixed blocks alone are larger than its budget: the window check counts them
        (
            "max_model_len: 100000\nscenarios: {scenario2: {sets: 2, repo_map: 90000, root_prompt: {lo: 50000, hi: 60000}}}",
            "scenario 2 branch can need",
        ),
    ],
)
def test_bad_workload_is_one_line_exit_2_and_nothing_written(tmp_path, text, says):
    workload = tmp_path / "bad.yaml"
    workload.write_text(text)

    result = run_fastgen(*QUIET, "--workload", str(workload), *_paths(tmp_path))

    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("fastgen: error: ") and says in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_workload_with_several_errors_lists_each_on_its_own_line_exit_2(tmp_path):
    workload = tmp_path / "bad.yaml"
    workload.write_text(
        "timing: {decode_ms_per_token: 2.5}\n"
        "scenarios:\n  scenario1: {sesions: 4, system: -3, bug_report: {lo: 45}}\n"
        "  scenario2: {concurency: [1, 2]}\n"
    )

    result = run_fastgen("workload", "show", "--workload", str(workload))

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"fastgen: error: {workload}: 5 problems:",
        "  timing.decode_ms_per_token: expected an integer, got 2.5",
        "  scenarios.scenario1.sesions: unknown key; did you mean 'sessions'?",
        "  scenarios.scenario1.system: expected an integer >= 0, got -3",
        "  scenarios.scenario1.bug_report.hi: missing; add it",
        "  scenarios.scenario2.concurency: unknown key; did you mean 'concurrency'?",
    ]


def test_workload_with_more_than_ten_errors_lists_ten_then_how_many_more():
    fields = ", ".join(f"{name}: -1" for name in ("system", "tools", "repo_map", "file_context")) + ", x1: 1, x2: 2"
    text = f"scenarios: {{scenario1: {{{fields}}}, scenario2: {{{fields}}}}}"

    with pytest.raises(WorkloadError) as caught:
        parse_workload(text, source="w.yaml")

    lines = str(caught.value).splitlines()
    assert lines[0] == "w.yaml: 12 problems:"
    assert len(lines) == 12 and lines[-1] == "  and 2 more"
    assert lines[1] == "  scenarios.scenario1.system: expected an integer >= 0, got -1"


@pytest.mark.parametrize(
    "text, says",
    [
        ("scenarios: {scenario1: {sesion: 4}}", "scenarios.scenario1.sesion: unknown key; did you mean 'sessions'?"),
        ("scenarios: {scenario1: {zzz: 4}}", "scenarios.scenario1.zzz: unknown key; the known ones: sessions, system,"),
        ("scenarios: {scenaro1: {}}", "scenarios.scenaro1: no such scenario; did you mean 'scenario1'?"),
        (
            "timing: {think_gap_ms: {lo: 1, hi: 2, mid: 1}}\nscenarios: {scenario1: {}}",
            "timing.think_gap_ms.mid: unknown key; this value takes one of {lo, hi}; {median, p90, cap}",
        ),
    ],
)
def test_workload_unknown_key_suggests_the_closest_known_one(text, says):
    with pytest.raises(WorkloadError) as caught:
        parse_workload(text, source="w.yaml")

    assert str(caught.value).startswith(f"w.yaml: {says}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_window_too_small_in_the_workload_names_its_key_and_file(tmp_path):
    workload = tmp_path / "small.yaml"
    workload.write_text("max_model_len: 20000\nscenarios: {scenario1: {}}\n")

    from_file = run_fastgen(*QUIET, "--workload", str(workload), *_paths(tmp_path))
    from_flag = run_fastgen(*QUIET, "--workload", str(workload), "--max-model-len", "20000", *_paths(tmp_path))

    assert from_file.returncode == 2 and from_flag.returncode == 2
    (line,) = from_file.stderr.splitlines()
    assert f"more than max_model_len 20000 (set in {workload}); raise max_model_len there" in line, line
    assert "more than --max-model-len 20000; raise --max-model-len" not in line
    (line,) = from_flag.stderr.splitlines()
    assert "more than --max-model-len 20000; raise --max-model-len" in line and str(workload) not in line, line


def test_huge_workload_is_refused_before_parsing(tmp_path):
    workload = tmp_path / "huge.yaml"
    workload.write_text("scenarios: {scenario2: {}}\n" + "# padding\n" * 100_000)

    result = run_fastgen(*QUIET, "--workload", str(workload), *_paths(tmp_path))

    assert result.returncode == 2 and "is not a workload (at most" in result.stderr


def test_a_folder_named_like_a_shipped_workload_does_not_hide_it(tmp_path):
    (tmp_path / "smoke").mkdir()  # e.g. the output of an earlier `--output-dir smoke/traces`

    result = run_fastgen(*QUIET, "--workload", "smoke", *_paths(tmp_path / "smoke"), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "smoke" / "traces" / "scenario1").glob("*.json"))) == 4


def test_the_fleet_preset_has_a_test_arm_that_reuses_and_a_control_arm_that_reuses_nothing(tmp_path):
    spec = load_workload(WORKLOADS_DIR / "fleet.yaml")
    assert list(spec.scenarios) == ["scenario3", "chain"]
    assert spec.scenario3.sessions == spec.chain.sessions == 500 and spec.chain.shared_prefix is False
    assert [len(step.add) for step in spec.chain.steps] == [1]  # one request a session: nothing to reuse in it
    small = ["--workload", "fleet", "--scale", "0.01", "--budget-scale", "0.02", "--arrival-window", "10"]
    assert run_fastgen(*QUIET, *small, *_paths(tmp_path)).returncode == 0
    analyzed = run_fastgen(
        "analyze", str(tmp_path / "traces"), "--block-size", "32", "--json", str(tmp_path / "a.json")
    )
    assert analyzed.returncode == 0, analyzed.stderr
    hits = {c["config"]: c["hit_percent_infinite"] for c in json.loads((tmp_path / "a.json").read_text())["configs"]}
    assert {name: hit for name, hit in hits.items() if name.startswith("chain/")} == {
        "chain/c16": 0.0,
        "chain/c64": 0.0,
    }
    assert min(hit for name, hit in hits.items() if name.startswith("scenario3/")) > 50
