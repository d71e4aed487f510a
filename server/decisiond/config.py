"""Server settings: the one place that reads the environment.

Every knob is a field of :class:`Settings`, read from ``DECISIOND_*`` environment variables and
overridden by command-line flags (``decisiond serve --help``). Nothing else in the package reads
``os.environ``; a convention test enforces it.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .model_names import parse_alias

#: Hard ceiling of options per choice question (spec/wire.md §2).
MAX_CHOICE_OPTIONS = 255
#: Default ceiling of levels per score question (spec/wire.md §2; a server setting).
DEFAULT_MAX_SCORE_LEVELS = 10
#: Default ceiling of JSON nesting in the state, instructions and criteria (a JSON bomb is refused).
DEFAULT_MAX_JSON_DEPTH = 64

Device = Literal["auto", "cpu", "cuda"]
DType = Literal["auto", "float32", "bfloat16", "float16"]


class Settings(BaseSettings):
    """Everything the server can be told, with the defaults a local user expects.

    Environment variables use the prefix ``DECISIOND_`` (``DECISIOND_PORT=9000``). Lists are
    JSON (``DECISIOND_MODEL='["minilm-l6"]'``).
    """

    model_config = SettingsConfigDict(env_prefix="DECISIOND_", extra="ignore")

    model: list[str] = Field(default_factory=lambda: ["minilm-l6"], description="models to serve; first is default")
    models_dir: Path = Field(default=Path("models"), description="folder of model manifests (*.toml)")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    device: Device = "auto"
    dtype: DType = "auto"

    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, description="largest request body (413 above)")
    max_questions: int = Field(
        default=512, ge=1, description="questions per request (the hosted service answers 512; tokens bound the cost)"
    )
    max_options: int = Field(default=MAX_CHOICE_OPTIONS, ge=1, le=MAX_CHOICE_OPTIONS, description="options per choice")
    max_levels: int = Field(default=DEFAULT_MAX_SCORE_LEVELS, ge=1, le=100, description="levels per score")
    max_state_tokens: int = Field(default=32768, ge=16, description="state tokens per request")
    max_total_tokens: int = Field(default=65536, ge=16, description="state + question tokens per request")
    max_text_chars: int = Field(
        default=2_000_000, ge=1000, description="characters of the state and question texts, before tokenising"
    )
    max_json_depth: int = Field(
        default=DEFAULT_MAX_JSON_DEPTH, ge=2, le=512, description="nesting of the state, instructions and criteria"
    )

    max_batch_tokens: int = Field(default=16384, ge=64, description="token budget of one micro-batch")
    max_wait_ms: float = Field(
        default=8.0, ge=0.0, le=1000.0, description="micro-batch gathering window under load (ms)"
    )
    max_header_bytes: int = Field(default=64 * 1024, ge=1024, description="request line and headers (431 above)")
    header_timeout_s: float = Field(default=10.0, gt=0.0, description="time to send the request headers (408 after)")
    body_timeout_s: float = Field(default=30.0, gt=0.0, description="time to send the request body (408 after)")
    keep_alive_timeout_s: int = Field(default=5, ge=1, description="idle keep-alive connections are closed after")
    max_queue: int = Field(default=256, ge=1, description="requests waiting before 529")
    request_timeout_s: float = Field(default=30.0, gt=0.0, description="longest time from arrival to answer before 529")
    threads: int | None = Field(
        default=None, ge=1, le=1024, description="torch intra-op threads; default: per usable CPU (threads.py)"
    )

    max_images: int = Field(default=16, ge=0, description="images per request, both wire shapes together")
    max_image_bytes: int = Field(default=8 * 1024 * 1024, ge=1, description="bytes of one decoded image file")
    max_image_pixels: int = Field(default=25_000_000, ge=1, description="width x height of one image (bomb guard)")
    max_request_pixels: int = Field(default=100_000_000, ge=1, description="decoded pixels of one request's images")
    max_decodes: int = Field(default=2, ge=1, description="images decoded at once, across all requests")

    cache_entries: int = Field(default=50_000, ge=0, description="slot-embedding cache entries")
    cache_bytes: int = Field(default=128 * 1024 * 1024, ge=0, description="slot-embedding cache bytes")

    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "decisiond",
        description="user cache folder (GGUF weights converted once to safetensors)",
    )

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto", description="auto: text on a terminal, json (one object per line) elsewhere"
    )

    api_keys: SecretStr = Field(default=SecretStr(""), description="comma-separated API keys; none: auth off")
    api_keys_file: Path | None = Field(default=None, description="file of API keys, one per line")
    shutdown_timeout_s: float = Field(default=30.0, ge=0.0, description="time to finish in-flight work on SIGTERM")

    replay: list[Path] = Field(default_factory=list, description="cassettes (JSON lines) whose answers are replayed")
    replay_mode: Literal["strict", "fallback"] = Field(
        default="strict", description="an unrecorded request: strict → 404, fallback → the local model answers"
    )
    scripted: Path | None = Field(default=None, description="rules file (TOML or YAML) served by the scripted backend")
    playground: bool = Field(default=True, description="serve the browser playground at / (False: / is 404)")

    aliases: list[str] = Field(default_factory=list, description="more model ids, each NAME=MODEL")
    strict_models: bool = Field(default=False, description="only served names and aliases, not the hosted Jev ids")

    @property
    def needs_model(self) -> bool:
        """False when every answer comes from cassettes (strict replay): no model is loaded."""
        return not (self.replay and self.replay_mode == "strict")

    @field_validator("model", mode="before")
    @classmethod
    def _split_models(cls, value: object) -> object:
        if isinstance(value, str):
            return [part for part in value.split(",") if part]
        return value

    @field_validator("aliases")
    @classmethod
    def _aliases_are_pairs(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_alias(entry)
        return value

    @field_validator("model")
    @classmethod
    def _at_least_one(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one model is needed")
        return value

    def keys(self) -> tuple[str, ...]:
        """The configured API keys: ``api_keys`` split on commas, then ``api_keys_file``'s lines.

        Blank entries, surrounding whitespace and ``#`` comment lines are dropped. No keys: auth is off.

        Raises:
            ValueError: ``api_keys_file`` cannot be read (naming the path, never a key).
        """
        keys = [key.strip() for key in self.api_keys.get_secret_value().split(",")]
        if self.api_keys_file is not None:
            try:
                text = self.api_keys_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read the API keys file {self.api_keys_file}: {type(exc).__name__}") from None
            keys += [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]
        return tuple(dict.fromkeys(key for key in keys if key))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings from the environment (cached)."""
    return Settings()


def read_env(name: str) -> str | None:
    """The value of the environment variable ``name``, or None when it is unset or blank.

    Used for secrets named on the command line (``decisiond record --api-key-env VAR``), which are
    read here so that the rest of the package never touches ``os.environ``.
    """
    value = os.environ.get(name, "").strip()
    return value or None


def default_cache_dir() -> Path:
    """``$DECISIOND_CACHE_DIR`` when set, else ``~/.cache/decisiond`` (the default of ``--cache-dir``)."""
    value = read_env("DECISIOND_CACHE_DIR")
    return Path(value).expanduser() if value else Path.home() / ".cache" / "decisiond"


def hf_offline_env() -> None:
    """Force the Hugging Face libraries offline: weights are never downloaded at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: Thread variables decisiond sets, unless the user set them, before torch is imported: a waiting
#: OpenMP thread spins briefly, then sleeps (libgomp: GOMP_SPINCOUNT iterations, tens of µs, instead
#: of its default 300,000; Intel's runtime: sleep at once), and the tokenizers' Rust thread pool stays
#: off (texts are tokenised on the model thread, one micro-batch per call). Measured on 2 cores
#: (docs/benchmarks.md): a short spin keeps the quiet one-client latency of the default (9.6 ms vs
#: 11.2 ms sleeping at once) and nearly all of sleeping's gain beside busy processes. A user's
#: OMP_WAIT_POLICY is kept, and then no GOMP_SPINCOUNT is set (it would override that policy).
#: See :mod:`decisiond.threads`.
OPENMP_DEFAULTS = {"GOMP_SPINCOUNT": "20000", "KMP_BLOCKTIME": "0", "TOKENIZERS_PARALLELISM": "false"}
#: The variables :func:`openmp_env` reports.
OPENMP_VARS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "TOKENIZERS_PARALLELISM")


def quiet_openmp_env() -> bool:
    """Set :data:`OPENMP_DEFAULTS` where the user has not, before torch (and its OpenMP runtime,
    which reads them once at load) is imported. Returns False, setting nothing, when torch is
    already imported: the variables would no longer take effect, and reporting them would lie."""
    if "torch" in sys.modules:
        return False
    for name, value in OPENMP_DEFAULTS.items():
        if name == "GOMP_SPINCOUNT" and os.environ.get("OMP_WAIT_POLICY"):
            continue  # the user chose a wait policy: a spin count of ours would override it
        os.environ.setdefault(name, value)
    return True


def openmp_env() -> dict[str, str]:
    """The OpenMP variables of :data:`OPENMP_VARS` that are set (by the user or by decisiond)."""
    return {name: os.environ[name] for name in OPENMP_VARS if os.environ.get(name, "").strip()}


def quiet_progress_env() -> None:
    """Turn off tqdm progress bars made after this call, also those transformers draws without its own
    switch (the GGUF conversion): ``--log-format json`` must write only JSON lines."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
