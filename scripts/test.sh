#!/usr/bin/env bash
# One command from a clean machine to a green test run: ./scripts/test.sh [pytest args]
# Same install as serve.sh plus the test extras, then the whole suite (offline, CPU only).
set -euo pipefail
. "$(dirname "$0")/_env.sh" test
# The official JavaScript SDK, pinned in tests/js/package-lock.json, for tests/test_official_sdks.py.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "node/npm not found: the JavaScript SDK checks will be skipped" >&2
fi
set +e
python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests (exit 5): that is a failure here, the suite must never be empty" >&2
  exit 1
fi
exit "$status"
