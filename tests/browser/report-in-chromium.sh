#!/usr/bin/env bash
# Browser check of `lpx report` (run by tools/test.sh after ctest): a tiny real sweep, the
# installed lpx's report of it (README "Installing"), its
# report.html opened in headless Debian Chromium, offline. Passes when every chart rendered
# (body[data-charts] = "rendered N") and no script error was recorded (#errors empty).
# The screenshot is kept as build/artifacts/report.png.
# Usage: tests/browser/report-in-chromium.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p "${1:-build}/artifacts"
build="$(cd "${1:-build}" && pwd)"
lpx="$build/tools/lpx"
chromium="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$chromium" ] || { echo "browser test: chromium is missing (tools/install-deps.sh installs it)" >&2; exit 1; }
[ -x "$lpx" ] || { echo "browser test: $lpx not built" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts"
"$lpx" sweep --recipes mxfp8,mxfp4-rne --steps 16 --set batch=32 --set threads=1 --jobs 2 --progress-every 0 --out "$work/sweep" >/dev/null
# the report of an installed lpx (cmake --install into a temporary prefix), run from a
# folder outside the source tree: its chart library comes from the binary or share/lpx
cmake --install "$build" --prefix "$work/prefix" >/dev/null
(cd "$work" && env -u LPX_REPORT_ASSETS "$work/prefix/bin/lpx" report "$work/sweep" >/dev/null)
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --virtual-time-budget=20000)
url="file://$work/sweep/report.html"
timeout 120 "$chromium" "${flags[@]}" --user-data-dir="$(mktemp -d -p "$work")" --dump-dom "$url" >"$work/dom.html" 2>/dev/null
timeout 120 "$chromium" "${flags[@]}" --user-data-dir="$(mktemp -d -p "$work")" --window-size=1280,2400 \
  --screenshot="$build/artifacts/report.png" "$url" >/dev/null 2>&1 || true
state="$(grep -o 'data-charts="[^"]*"' "$work/dom.html" | head -1)"
errors="$(sed -n 's|.*<pre id="errors">\([^<]*\)</pre>.*|\1|p' "$work/dom.html" | head -1)"
passed=0 failed=0
if [[ "$state" =~ rendered\ [1-9] ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "browser test: charts not rendered ($state)" >&2; fi
if [ -z "$errors" ] && grep -q '<pre id="errors"></pre>' "$work/dom.html"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "browser test: script errors: $errors" >&2; fi
echo "browser: $passed passed, $failed failed ($state; screenshot $build/artifacts/report.png)"
[ "$failed" -eq 0 ]
