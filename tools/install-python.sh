#!/usr/bin/env bash
# Makes `import lpx` work for Debian's /usr/bin/python3 without PYTHONPATH and without a
# package index (docs/python.md#install): builds lpx in build/ (tools/build.sh, which is
# incremental), then copies the built package (BUILD/python/lpx: the extension and the
# pure-Python files) into that interpreter's user site-packages
# (`python3 -m site --user-site`, under $HOME/.local). Nothing system-wide is touched, so
# Debian's PEP 668 guard (pip's "externally-managed-environment") does not apply.
#
#   tools/install-python.sh                  build (incremental), install (or update)
#   tools/install-python.sh --uninstall      remove what this script installed
#   tools/install-python.sh --build-dir DIR  take the module already built in DIR (no build)
#
# The copy is standalone; rerun after rebuilding to update it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python=/usr/bin/python3
build="$repo/build"
uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --uninstall) uninstall=1 ;;
    --build-dir) [ $# -ge 2 ] || { echo "install-python: --build-dir needs a folder" >&2; exit 2; }
                 build="$(cd "$2" && pwd)"; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-python: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

site="$("$python" -m site --user-site)"
target="$site/lpx"
marker="$target/INSTALLED_BY_LPX"

if [ "$uninstall" = 1 ]; then
  if [ ! -e "$target" ]; then
    echo "install-python: nothing to remove ($target does not exist)"
    exit 0
  fi
  [ -f "$marker" ] || { echo "install-python: $target was not installed by this script; left alone" >&2; exit 1; }
  rm -rf "$target"
  echo "install-python: removed $target"
  exit 0
fi

if [ "$build" = "$repo/build" ]; then
  # the default build folder is brought up to date (incremental; a no-op when it is)
  echo "install-python: building lpx (tools/build.sh)"
  "$repo/tools/build.sh"
  compgen -G "$build/python/lpx/_core*.so" >/dev/null || {
    echo "install-python: the build made no Python module (see 'lpx: Python module skipped' in CMake's output; tools/install-deps.sh installs what it needs)" >&2
    exit 1
  }
elif ! compgen -G "$build/python/lpx/_core*.so" >/dev/null; then
  echo "install-python: no built module in $build/python/lpx (build that folder first)" >&2
  exit 1
fi

if [ -e "$target" ] && [ ! -f "$marker" ]; then
  echo "install-python: $target exists and was not installed by this script; left alone" >&2
  exit 1
fi
mkdir -p "$site"
tmp="$(mktemp -d "$site/.lpx-install.XXXXXX")"
cp -R "$build/python/lpx/." "$tmp/"
rm -rf "$tmp/__pycache__"
printf 'installed by %s from %s\n' "$repo/tools/install-python.sh" "$build/python/lpx" >"$tmp/INSTALLED_BY_LPX"
rm -rf "$target"
mv "$tmp" "$target"
echo "install-python: installed lpx into $target (for $python; remove with $0 --uninstall)"
