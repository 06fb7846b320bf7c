#!/usr/bin/env bash
# ctest install_report (label install): `cmake --install` into a temporary prefix, then the
# installed lpx, and a copy of it in a folder of its own, each write a report of a tiny
# sweep from a working folder outside the source tree, with no LPX_REPORT_ASSETS: the
# chart library must come from the binary or from PREFIX/share/lpx (README "Installing").
# Usage: test_install_report.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/lpx-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_report: FAILED: $*"; exit 1; }
unset LPX_REPORT_ASSETS
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || fail "cmake --install: $(tail -1 "$tmp/install.log")"
lpx="$tmp/prefix/bin/lpx"
[ -x "$lpx" ] || fail "no bin/lpx in the prefix"
[ -f "$tmp/prefix/share/lpx/recipes/mxfp8.json" ] || fail "no share/lpx/recipes/mxfp8.json"
[ -f "$tmp/prefix/share/lpx/report/report.html.in" ] || fail "no share/lpx/report/report.html.in"
mkdir "$tmp/copy" "$tmp/work"
cp "$lpx" "$tmp/copy/lpx"
cd "$tmp/work"
"$lpx" sweep --recipes bf16 --steps 3 --set hidden=8 --set batch=8 --out "$tmp/work/s" --progress-every 0 >/dev/null ||
  fail "the installed lpx sweep failed"
for bin in "$lpx" "$tmp/copy/lpx"; do
  rm -f s/report.html
  "$bin" report s >"$tmp/out.txt" 2>&1 || fail "$bin report: $(head -1 "$tmp/out.txt")"
  grep -q "vegaEmbed" s/report.html || fail "$bin: report.html lacks the chart library"
  grep -q "vega-lite/v6.json" s/report.html || fail "$bin: report.html has no chart"
done
echo "install_report: the installed lpx and a copy of it wrote reports with the chart library"
