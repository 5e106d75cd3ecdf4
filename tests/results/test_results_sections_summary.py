"""results/sections/summary.py: the summary's rule and its findings: no difference, a difference, too few to tell."""

from __future__ import annotations

from _support.results import report_of, section, swarm_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_summary_states_no_difference_within_the_margin(tmp_path):
    rng = __import__("random").Random(3)
    same = [100 + rng.random() * 200 for _ in range(40)]
    for k in (1, 2):
        write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests(same), repeat=k, repeats=2)
        b = swarm_requests([t * 1.03 for t in same[::-1]])
        write_repeat(tmp_path / "b" / "scenario1" / "c2", b, repeat=k, repeats=2)
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (level,) = table(report, "scenario1", "TTFT of text answers by concurrency")
    assert level["TTFT p50 ms B/A"]["distinguishable"] is False and level["TTFT p50 ms B/A"]["p"] > 0.05
    findings = section(report, "summary")["findings"]
    assert findings[0].startswith("The rule: a B/A is a difference when its 95 % interval")
    assert findings[1].startswith("No difference between A (a) and B (b) in the headline figures of 1 config")
    assert "1.03 ~" in (tmp_path / "out" / "report.md").read_text()


def test_compare_summary_states_a_difference_beyond_the_margin(tmp_path):
    for k, shift in ((1, 0), (2, 2)):
        a = swarm_requests([100 + i + shift for i in range(40)])
        write_repeat(tmp_path / "a" / "scenario1" / "c2", a, repeat=k, repeats=2)
        write_repeat(
            tmp_path / "b" / "scenario1" / "c2", swarm_requests([300 + i - shift for i in range(40)]), repeat=k
        )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    findings = section(report_of(tmp_path / "out"), "summary")["findings"]
    assert 2 <= len(findings) <= 8
    # the largest first: p50 318.5 against 120.5 (means of each run's)
    assert findings[1].startswith(
        "scenario1/c2: TTFT p50 ms (text answers) 318 on B (b) against 120 on A (a), B/A 2.64 ["
    )
    assert "(n 80 and 80, 40 sessions; 2 runs and 2 runs)" in findings[1]


def test_compare_summary_with_one_run_says_times_are_too_few_to_tell(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests([100 + i for i in range(40)]))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", swarm_requests([300 + i for i in range(40)]))
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    findings = section(report_of(tmp_path / "out"), "summary")["findings"]
    assert findings[1].startswith("No difference between A (a) and B (b) in the headline figures")
    (few,) = [f for f in findings if f.startswith("Too few to tell")]
    assert "TTFT p50 ms, TTFT p95 ms of scenario1/c2 (a time, and one run a side: 2 needed)" in few
    assert "output tok/s of scenario1/c2 (a figure of whole runs, 1 run on a side: 2 needed)" in few
    assert findings[-1].startswith("One run a side: times and rates are too few to tell")
