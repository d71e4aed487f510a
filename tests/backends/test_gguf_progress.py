"""The GGUF conversion says what it is doing over its whole duration, not only while the weights
are dequantised (the one step with a progress bar)."""

from __future__ import annotations

import logging
import threading

import pytest

from decisiond.backends.causal_lm.loading import conversion_step


def test_a_long_step_logs_its_start_a_heartbeat_and_its_duration(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: a 40 s conversion showed progress for 3 s and was silent the rest of the time."""
    released = threading.Event()
    with caplog.at_level(logging.INFO, logger="decisiond.backends.causal_lm"):
        with conversion_step(1, 3, "reading the tokenizer", every_s=0.01):
            for _ in range(500):  # until two heartbeats were written (at most 5 s)
                if sum("still reading" in r.getMessage() for r in caplog.records) >= 2:
                    break
                released.wait(0.01)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "GGUF conversion 1/3: reading the tokenizer"
    assert sum(line.startswith("GGUF conversion 1/3: still reading the tokenizer (") for line in lines) >= 2
    assert lines[-1].startswith("GGUF conversion 1/3: reading the tokenizer took ")
    assert not any(t.name == "decisiond-gguf-progress" for t in threading.enumerate())  # the heartbeat stopped


def test_a_failing_step_stops_its_heartbeat() -> None:
    with pytest.raises(RuntimeError), conversion_step(2, 3, "dequantising", every_s=0.01):
        raise RuntimeError("the file is corrupt")
    assert not any(t.name == "decisiond-gguf-progress" for t in threading.enumerate())
