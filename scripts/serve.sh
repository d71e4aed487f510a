#!/usr/bin/env bash
# One command from a clean machine to a running server: ./scripts/serve.sh [decisiond serve flags]
# Creates .venv, installs CPU torch 2.13.0 when no torch is present, installs decisiond, and
# serves the default model (minilm-l6) on http://127.0.0.1:8000.
set -euo pipefail
DECISIOND_EXTRAS=""  # _env.sh reads its extras from this variable, never from serve.sh's arguments
. "$(dirname "$0")/_env.sh"
exec decisiond serve "$@"
