#!/usr/bin/env bash
# The main job on built-in defaults: install, build, and take the tour (a format's code
# table, every format's limits, and what each format does to a built-in sample).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
build/tools/lpx tour "$@"
