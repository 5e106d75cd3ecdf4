"""fastgen/traffic/logged.py, what the readers of the agents' logs share: ISO timestamps in ms, an answer's tokens
counted by a tokenizer or by characters, and a log's JSON lines with a bad one named by file and line."""

from __future__ import annotations

import pytest

from fastgen.traffic.logged import AgentLogError, chars_per_token, counted, iso_ms, log_lines


def test_iso_timestamps_in_z_or_an_offset_are_the_same_instant_in_ms():
    assert iso_ms("1970-01-01T00:00:01.5Z") == 1500.0
    assert iso_ms("1970-01-01T01:00:01.5+01:00") == 1500.0


@pytest.mark.parametrize("text", [None, 17, "", "yesterday"])
def test_what_is_not_a_timestamp_is_none(text):
    assert iso_ms(text) is None


def test_tokens_are_counted_by_the_tokenizer_when_given_else_by_characters_rounded_up():
    assert counted(["abc", "", "de"], lambda text: 10 * len(text)) == 50
    assert counted(["a" * chars_per_token, "b"], None) == 2
    assert counted([], None) == 0


def test_log_lines_skips_blank_lines_and_rows_that_are_not_objects(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n\n[1, 2]\n  \n{"b": 2}\n')
    assert log_lines(path) == [{"a": 1}, {"b": 2}]


def test_a_line_that_is_not_json_is_one_error_naming_file_and_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"b": \n')
    with pytest.raises(AgentLogError) as raised:
        log_lines(path)
    assert str(raised.value) == f"{path}:2: not a JSON line"
