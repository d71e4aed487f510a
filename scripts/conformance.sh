#!/usr/bin/env bash
# Start decisiond on a free port, run the jevcompat conformance suite against it, stop it.
# Fails unless every MUST and every SHOULD jevcompat tests passes.
# Usage: scripts/conformance.sh [--key KEY] [decisiond serve flags]   (run inside the project's .venv)
#   --key KEY: serve with that API key (DECISIOND_API_KEYS) and pass it to jevcompat, which then also
#              checks the auth SHOULDs (a missing key refused, a wrong key refused, Bearer accepted).
set -euo pipefail
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
key_args=()
if [ "${1:-}" = "--key" ]; then
  if [ -z "${2:-}" ]; then echo "--key needs a value" >&2; exit 2; fi
  export DECISIOND_API_KEYS="$2"
  key_args=(--key-env DECISIOND_API_KEYS)
  shift 2
fi
port="$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp)"
decisiond serve --port "$port" "$@" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 240); do
  if curl -sf "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"ok"'; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "decisiond exited:" >&2; cat "$log" >&2; exit 1; fi
  sleep 0.5
done
report="$(jevcompat test "http://127.0.0.1:$port" "${key_args[@]}" 2>&1)" || true
echo "$report"
summary="$(echo "$report" | grep -E 'MUST [0-9]+/[0-9]+, SHOULD [0-9]+/[0-9]+' | tail -1)"
if [ -z "$summary" ]; then echo "no jevcompat summary line" >&2; exit 1; fi
must="$(echo "$summary" | sed -E 's/.*MUST ([0-9]+)\/([0-9]+).*/\1 \2/')"
should="$(echo "$summary" | sed -E 's/.*SHOULD ([0-9]+)\/([0-9]+).*/\1 \2/')"
read -r must_ok must_all <<<"$must"
read -r should_ok should_all <<<"$should"
if [ "$must_ok" != "$must_all" ] || [ "$should_ok" != "$should_all" ]; then
  echo "conformance failed: $summary" >&2
  exit 1
fi
echo "conformance passed: $summary"
