# Sourced by .ci/run: Debian's chromium for the playground tests (tests/playground/), which
# drives /usr/bin/chromium through Playwright's Python package (never `playwright install`).
# Installs it only when it is missing, we are root and apt-get exists; otherwise says how.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium for the playground test (about 100 MB download, 400 MB on disk)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing and cannot be installed here (needs root and apt-get):" \
      "install Debian's chromium, or the playground browser test fails in CI" >&2
  fi
fi
