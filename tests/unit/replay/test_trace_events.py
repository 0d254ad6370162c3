"""The trace stream against the json module's own reading of the same files, at every chunk size that
cuts events, keys and numbers apart; and every kind of file that is no trace, refused in one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nccl_bench.replay import trace_events
from nccl_bench.replay.trace_events import TraceError, stream_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MODERN = TRACES / "nccl_2gpu_rank0.json.gz"
OLDER = TRACES / "nccl_8gpu_older_rank3.json.gz"


@pytest.mark.parametrize("chunk_chars", [1, 7, 4096])
def test_the_stream_is_the_whole_files_events_and_metadata(monkeypatch, chunk_chars):
    monkeypatch.setattr(trace_events, "CHUNK_CHARS", chunk_chars)
    whole = json.loads(gzip.decompress(OLDER.read_bytes()))
    stream = stream_trace(OLDER)
    assert list(stream) == whole.pop("traceEvents")
    assert stream.metadata == whole


def test_a_large_real_trace_streams_in_one_piece():
    whole = json.loads(gzip.decompress(MODERN.read_bytes()))
    stream = stream_trace(MODERN)
    assert sum(1 for _ in stream) == len(whole["traceEvents"]) == 40573
    assert stream.metadata["distributedInfo"] == whole["distributedInfo"]


def test_metadata_after_the_events_and_a_bare_array(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_events, "CHUNK_CHARS", 3)
    events = [{"ph": "X", "name": "a", "ts": 12345, "dur": 1.5}, {"ph": "i", "name": "b", "ts": 7}]
    after = tmp_path / "after.json"
    after.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 3}, "n": 10}, indent=2))
    stream = stream_trace(after)
    assert list(stream) == events and stream.metadata == {"distributedInfo": {"rank": 3}, "n": 10}
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    assert list(stream_trace(bare)) == events


def _refusal(path: Path) -> str:
    with pytest.raises(TraceError) as caught:
        list(stream_trace(path))
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    return message


def test_a_truncated_gzip_is_refused(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(OLDER.read_bytes()[:3000])
    assert "gzip data is cut short or damaged" in _refusal(cut)


def test_a_truncated_json_is_refused(tmp_path):
    text = gzip.decompress(OLDER.read_bytes()).decode()
    for end in (len(text) // 2, len(text) - 1, text.index('"traceEvents"') + 20):
        cut = tmp_path / f"cut{end}.json"
        cut.write_text(text[:end])
        assert "cut short" in _refusal(cut)


@pytest.mark.parametrize("text,problem", [
    ('{"schemaVersion": 1}', "no traceEvents array"),
    ('[[1, 2], [3]]', "not a JSON object"),
    ('{"traceEvents": [1]}', "not a JSON object"),
    ('"a string"', "neither a JSON object with traceEvents nor an array"),
    ("", "neither a JSON object with traceEvents nor an array"),
    ('{"traceEvents": []} []', "text follows"),
    ('{"traceEvents": [{"a": 1} {"b": 2}]}', "malformed"),
    ('{"traceEvents": [{"a": 1},, {"b": 2}]}', "malformed"),
    ('{"traceEvents": [{"a": tru}]}', "malformed"),
])
def test_json_that_is_no_trace_is_refused(tmp_path, text, problem):
    path = tmp_path / "trace.json"
    path.write_text(text)
    assert problem in _refusal(path)


def test_text_that_is_not_utf8_and_a_missing_file(tmp_path):
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"traceEvents": [{"name": "caf\xe9"}]}')
    assert "not UTF-8" in _refusal(latin)
    assert "No such file" in _refusal(tmp_path / "absent.json")


def test_one_value_longer_than_the_bound_is_refused_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_events, "CHUNK_CHARS", 16)
    monkeypatch.setattr(trace_events, "MAX_EVENT_CHARS", 100)
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"traceEvents": [{"name": "x" * 500}]}))
    assert "runs past 100 characters" in _refusal(path)
