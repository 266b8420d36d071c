#!/bin/bash
# scripts/flame-png.sh SVG PNG: a flame graph SVG (gsymprof flamegraph,
# profile --svg) rendered to PNG at its own size by headless Chromium, as
# tests/e2e/flamegraph_browser.sh drives it. `make flame-png` makes the
# README's picture, docs/flame.png, from the demo's out/demo.svg.
# Env: CHROMIUM (default: chromium).
set -euo pipefail
[[ $# == 2 ]] || { echo "usage: scripts/flame-png.sh SVG PNG" >&2; exit 2; }
svg=$1 png=$2
CHROMIUM=${CHROMIUM:-chromium}
command -v "$CHROMIUM" > /dev/null ||
  { echo "flame-png.sh: $CHROMIUM missing (Debian: apt-get install chromium)" >&2; exit 1; }
read -r width height < <(sed -n 's/^<svg [^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\1 \2/p' "$svg")
[[ -n ${width:-} && -n ${height:-} ]] || { echo "flame-png.sh: $svg: no <svg width height>" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Headless, no network, no state kept; the page is the SVG alone.
timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size="$width,$height" \
  --screenshot="$work/flame.png" "file://$(realpath "$svg")" 2> "$work/chromium.log" ||
  { cat "$work/chromium.log" >&2; echo "flame-png.sh: chromium failed" >&2; exit 1; }
[[ $(head -c 8 "$work/flame.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  { echo "flame-png.sh: chromium wrote no PNG" >&2; exit 1; }
mkdir -p "$(dirname "$png")"
mv "$work/flame.png" "$png"
echo "flame-png.sh: $png (${width}x${height}) from $svg"
