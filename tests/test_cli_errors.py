"""What a new user sees when a command line is wrong: one clear line, never a traceback or a raw
pydantic error; ``--version``; readable text logs; a prompt exit."""

from __future__ import annotations

import json
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import decisiond
from decisiond import cli, logs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``cli.main`` sends the root logger to this test's captured stderr; later tests must not
    write to that closed stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err  # one line, not forty lines of usage
    return err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"decisiond {decisiond.__version__}"


def test_a_mistyped_flag_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error_of(["serve", "--prot", "9000"], capsys)
    assert "decisiond serve: error: unrecognized argument --prot (did you mean --port?)" in err
    assert "9000" not in err  # the mistyped flag's value is not reported as a second problem
    err = _error_of(["ask", "--stae", "hi"], capsys)
    assert "did you mean --state?" in err
    assert "did you mean" not in _error_of(["serve", "--zzzzzz"], capsys)


@pytest.mark.parametrize("value", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_one_clear_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: --port 99999 printed pydantic's multi-line error with a documentation URL."""
    err = _error_of(["serve", "--port", value], capsys)
    assert "argument --port:" in err and "is not a port number (0 to 65535)" in err and "http" not in err.lower()[-10:]


@pytest.mark.parametrize("value", ["notaurl", "ftp://example.com", "http://", "api.example.com"])
def test_a_record_upstream_that_is_no_http_url_is_one_clear_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `decisiond record --upstream notaurl` started the proxy anyway, and every request
    through it then got a 502 `UnsupportedProtocol`."""
    err = _error_of(["record", "--upstream", value, "--cassette", str(tmp_path / "c.jsonl")], capsys)
    assert "argument --upstream:" in err and "http:// or https:// URL" in err, err
    assert not (tmp_path / "c.jsonl").exists()


def test_a_bad_setting_from_the_environment_names_flag_and_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DECISIOND_PORT", "99999")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "decisiond serve: error: --port (DECISIOND_PORT): Input should be less than or equal to 65535"


def _logged_errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The messages of the error lines ``serve`` logged (JSON lines: stderr is no terminal here)."""
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    return [line["msg"] for line in lines if line["level"] == "error"]


def test_a_port_in_use_is_named_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a port in use gave uvicorn's bare `[Errno 98]` after the model had loaded."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert cli.main(["serve", "--models-dir", str(ROOT / "models"), "--port", str(port)]) == 2
    (message,) = _logged_errors(capsys)
    assert f"port {port} on 127.0.0.1 is already in use" in message and "--port" in message


def test_a_model_path_that_does_not_exist_says_no_such_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--model", "./no/such/dir", "--port", "0"]) == 2
    (message,) = _logged_errors(capsys)
    assert message.startswith("no such folder: ./no/such/dir")


def test_a_folder_that_is_no_checkpoint_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--model", str(tmp_path), "--port", "0"]) == 2
    (message,) = _logged_errors(capsys)
    assert "is no checkpoint that serves without a manifest" in message


def test_a_models_dir_that_does_not_exist_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: --models-dir /nonexistent was accepted silently (the embedded default served)."""
    assert cli.main(["serve", "--models-dir", "/nonexistent/models", "--port", "0"]) == 2
    monkeypatch.setenv("DECISIOND_MODELS_DIR", "/nonexistent/models")
    assert cli.main(["serve", "--port", "0"]) == 2
    messages = _logged_errors(capsys)
    assert len(messages) == 2 and all("/nonexistent/models: no such folder" in m for m in messages)
    assert cli.main(["models", "--models-dir", "/nonexistent/models"]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_text_logs_are_readable_lines_not_python_dicts() -> None:
    """Regression: --log-format text appended the access fields as a Python dict."""
    formatter = logs.TextFormatter()
    fields = {"id": "r1", "method": "POST", "route": "/v1/systemone", "model": "m", "questions": 3, "status": 200}
    record = logging.LogRecord("decisiond.access", logging.INFO, __file__, 1, "request", None, None)
    record.fields = {**fields, "tokens": 122, "ms": 12.5}
    line = formatter.format(record)
    assert line.endswith("INFO decisiond.access: POST /v1/systemone 200 12.5 ms model=m questions=3 tokens=122 id=r1")
    assert "{" not in line
    plain = logging.LogRecord("decisiond", logging.INFO, __file__, 1, "ready on %s", ("http://x",), None)
    assert formatter.format(plain).endswith("INFO decisiond: ready on http://x")


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_logs_are_text_on_a_terminal_and_json_elsewhere_unless_asked() -> None:
    assert logs.resolve_format("auto", _Stream(True)) == "text"  # type: ignore[arg-type]
    assert logs.resolve_format("auto", _Stream(False)) == "json"  # type: ignore[arg-type]
    assert logs.resolve_format("json", _Stream(True)) == "json"  # type: ignore[arg-type]
    assert logs.resolve_format("text", _Stream(False)) == "text"  # type: ignore[arg-type]


def test_the_record_proxy_configures_logging_so_each_request_gets_a_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `decisiond record` never configured logging, so its per-request info lines
    ("recorded ...", "not recorded ...") went nowhere."""
    import uvicorn

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(kwargs))
    argv = ["record", "--upstream", "http://127.0.0.1:9", "--cassette", str(tmp_path / "c.jsonl"), "--port", "0"]
    assert cli.main([*argv, "--log-format", "text"]) == 0
    assert seen["log_config"] is None and seen["access_log"] is False  # uvicorn keeps our handler
    logging.getLogger("decisiond.record").info("recorded /v1/systemone abc → 200 (m)")
    assert "INFO decisiond.record: recorded /v1/systemone abc → 200 (m)" in capsys.readouterr().err


def test_the_console_script_exits_at_once_after_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the process lingered 3 to 5 s after "Finished server process" while the
    interpreter tore torch down; the console script now flushes and leaves with main's code."""
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(cli, "main", lambda: 3)
    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    with pytest.raises(SystemExit):
        cli.run()
    assert exits == [3]
    assert sys.stderr is not None
