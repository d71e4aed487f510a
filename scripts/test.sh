#!/usr/bin/env bash
# One command from a clean machine to a green test run: ./scripts/test.sh [pytest args]
# Same install as serve.sh plus the test extras, then the whole suite (offline, CPU only).
# The Ray tests (marked `ray`, tests/scale_out/) start a local Ray instance: they are opt-in,
# DECISIOND_TEST_RAY=1 installs the `ray` extra and runs them too; `-m ray` runs only them.
set -euo pipefail
extras="test"
marks=(-m "not ray")
if [ "${DECISIOND_TEST_RAY:-0}" = "1" ]; then extras="test,ray"; marks=(); fi
previous=""
for arg in "$@"; do
  if [ "$arg" = "-m" ] || [[ "$arg" == -m* ]]; then marks=(); fi  # the caller chooses the markers
  if { [ "$previous" = "-m" ] || [[ "$arg" == -m* ]]; } && [[ "$arg" == *ray* ]] && [[ "$arg" != *"not ray"* ]]; then
    extras="test,ray"
  fi
  previous="$arg"
done
DECISIOND_EXTRAS="$extras"
. "$(dirname "$0")/_env.sh"
# The official JavaScript SDK, pinned in tests/js/package-lock.json, for tests/test_official_sdks.py.
if [ ! -f tests/js/package.json ]; then
  :  # a checkout without the JavaScript checks
elif command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "node/npm not found: the JavaScript SDK checks will be skipped" >&2
fi
set +e
python -m pytest "${marks[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests (exit 5): that is a failure here, the suite must never be empty" >&2
  exit 1
fi
exit "$status"
