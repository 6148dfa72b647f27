"""`--json` output: one object per line for every reader, whatever the text holds."""

from __future__ import annotations

import json

import pytest

from agentledger.services.entrypoints.reply import emit


@pytest.mark.parametrize("text", ["a\u2028b", "a\u2029b", "a\x85b", "a\nb\r\x0b\x0c\x1c\x1d\x1eb"])
def test_a_line_break_in_a_value_never_splits_the_object(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    emit({"text": text, "other": "é"})
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1, repr(out)
    assert json.loads(out) == {"text": text, "other": "é"}
    assert "é" in out  # still readable, not all escaped
