# tests/bench/sections/diff.sh - the `diff` section of tests/bench/run.sh
# (issue 30): `gsymprof diff` vs `go tool pprof -diff_base` on the same two
# pprof files of DIFF_STACKS unique stacks (make_pprof_pair.py: a generated
# call tree, 10 leaves tripled and 10 cut to a third in NEW): time and peak
# RSS of the SVG each draws (pprof's through Graphviz's dot) and of the text
# tables, runs alternating, median (min-max); and whether the two rank the
# same functions as the largest changes (top 10 by self change).
# Go: /usr/local/go/bin/go (or go on PATH); its pprof is built on first use
# into GOCACHE=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/gocache-pprof.
# Sourced by run.sh after tests/bench/common.sh; defines section_diff.
# shellcheck shell=bash

DIFF_STACKS=${DIFF_STACKS:-100000}

# Top N function names of the ranked lists: ours (text), pprof (-top).
diff_top_ours() { awk -v n="$2" 'NR > 4 && NF >= 9 { $1 = $2 = $3 = $4 = $5 = $6 = $7 = $8 = ""; sub(/^ +/, ""); print; if (++k == n) exit }' "$1"; }
diff_top_pprof() { awk -v n="$2" 'found { $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print; if (++k == n) exit } $1 == "flat" { found = 1 }' "$1"; }

section_diff() {
  section_begin diff
  local go
  go=$(command -v go || echo /usr/local/go/bin/go)
  md "## Differential profiles: gsymprof diff vs go tool pprof -diff_base (issue 30)"
  md
  machine_line
  md
  gsymprof_ready || { md "Skipped: gsymprof not built."; write_section diff "$SECTION_MD"; return 0; }
  local d=$TMP/diff
  mkdir -p "$d/pprof-tmp"
  python3 "$HERE/make_pprof_pair.py" "$d/base.pb.gz" "$d/new.pb.gz" "$DIFF_STACKS" > "$d/changed.txt" ||
    die "make_pprof_pair.py failed"
  local have_go=0 have_dot=0
  if [[ -x $go ]]; then have_go=1; else log "no Go toolchain: go tool pprof rows skipped"; fi
  if command -v dot >/dev/null; then have_dot=1; else log "no Graphviz dot (apt-get install graphviz): pprof -svg skipped"; fi
  local go_version
  go_version=$("$go" version 2>/dev/null | awk '{ print $3 }')
  export GOCACHE=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/gocache-pprof PPROF_TMPDIR=$d/pprof-tmp PPROF_BINARY_PATH=$d/none
  mkdir -p "$GOCACHE"
  local pprof=(env HOME="$d" "$go" tool pprof -sample_index=samples -symbolize=none -diff_base "$d/base.pb.gz")
  # pprof is built on first use: once, untimed.
  ((have_go)) && "${pprof[@]}" -top "$d/new.pb.gz" > /dev/null 2>&1
  md "Two gzipped pprof files ($(du -k "$d/base.pb.gz" | cut -f1) KB and $(du -k "$d/new.pb.gz" | cut -f1) KB) written by \`tests/bench/make_pprof_pair.py\`:"
  md "$DIFF_STACKS unique stacks 8-40 frames deep over 5,000 functions (NEW: 10 leaf functions x3, 10 x1/3, 1% new stacks)."
  md "\`gsymprof diff BASE NEW -o out.svg\` (normalized, the default) and \`--format text --no-normalize\`; \`go tool pprof -diff_base BASE -svg NEW\` (Graphviz's dot draws it) and \`-top\`"
  md "($go_version, \`-sample_index=samples -symbolize=none\`, the tool built beforehand; \`go tool\` starts it through the go command)."
  md "Wall and CPU seconds, peak RSS, median (min-max) of $ROUNDS alternating runs."
  md
  local r
  for f in ours-svg ours-text pprof-svg pprof-top; do : > "$d/$f.m"; done
  for ((r = 0; r < ROUNDS; r++)); do
    measure "$d/ours-svg.m" "$GSYMPROF" diff "$d/base.pb.gz" "$d/new.pb.gz" -o "$d/ours.svg" 2>"$d/ours.err" || log "gsymprof diff failed: $(tail -n 1 "$d/ours.err")"
    ((have_go && have_dot)) && { measure "$d/pprof-svg.m" "${pprof[@]}" -svg -output "$d/pprof.svg" "$d/new.pb.gz" 2>"$d/pprof.err" || log "pprof -svg failed: $(tail -n 1 "$d/pprof.err")"; }
    measure "$d/ours-text.m" "$GSYMPROF" diff --format text --no-normalize "$d/base.pb.gz" "$d/new.pb.gz" > "$d/ours.txt" 2>/dev/null
    ((have_go)) && measure "$d/pprof-top.m" "${pprof[@]}" -top "$d/new.pb.gz" > "$d/pprof.txt" 2>/dev/null
  done
  md "| tool | output | wall s | CPU s | peak RSS MB | pprof / ours (wall) |"
  md "|---|---|---:|---:|---:|---:|"
  local pair ours peer
  for pair in "svg|ours-svg|pprof-svg" "text table|ours-text|pprof-top"; do
    IFS='|' read -r what ours peer <<< "$pair"
    local ow pw
    ow=$(column "$d/$ours.m" 1); pw=$(column "$d/$peer.m" 1)
    md "| \`gsymprof diff\` | $what | $(awk '{ print $1 }' "$d/$ours.m" | spread 2) | $(awk '{ print $2 }' "$d/$ours.m" | spread 2) | $(awk '{ printf("%.0f\n", $3 / 1024) }' "$d/$ours.m" | median) | |"
    [[ -s $d/$peer.m ]] &&
      md "| \`go tool pprof -diff_base\` | $what | $(awk '{ print $1 }' "$d/$peer.m" | spread 2) | $(awk '{ print $2 }' "$d/$peer.m" | spread 2) | $(awk '{ printf("%.0f\n", $3 / 1024) }' "$d/$peer.m" | median) | $(ratio "$pw" "$ow" 1)x |"
  done
  md
  if [[ -s $d/pprof.txt && -s $d/ours.txt ]]; then
    diff_top_ours "$d/ours.txt" 10 > "$d/top.ours"
    diff_top_pprof "$d/pprof.txt" 10 > "$d/top.pprof"
    local same common planted
    same=$(cmp -s "$d/top.ours" "$d/top.pprof" && echo "in the same order" || echo "in another order")
    common=$(sort "$d/top.ours" | comm -12 - <(sort "$d/top.pprof") | wc -l)
    planted=$(sed 's/^[a-z]* //' "$d/changed.txt" | sort | comm -12 - <(sort "$d/top.ours") | wc -l)
    md "Agreement: of the 10 largest self changes, $common are the same functions in both ($same); $planted of ours are among the 20 planted changes."
    md "Top 3 (ours): $(head -n 3 "$d/top.ours" | sed 's/(int, std::string const&)//' | paste -sd, | sed 's/,/, /g')."
  fi
  write_section diff "$SECTION_MD"
}
