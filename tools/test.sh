#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (the slow-labelled exhaustive tests
# included), then a short libFuzzer run over the committed corpus. CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 1500
tests/browser/report-in-chromium.sh build
if [ -x tools/run-fuzz.sh ]; then
  tools/run-fuzz.sh --tests 10   # 10 s per fuzzer: CI's budget (the script's default is 20 s)
fi
