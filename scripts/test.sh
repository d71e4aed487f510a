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
. "$(dirname "$0")/_env.sh" "$extras"
set +e
python -m pytest "${marks[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests (exit 5): that is a failure here, the suite must never be empty" >&2
  exit 1
fi
exit "$status"
