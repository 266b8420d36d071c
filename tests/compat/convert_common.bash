# tests/compat/convert_common.bash - sourced by convert_*.sh: converts with
# gsymprof and llvm-gsymutil and compares lookups (see convert_llvm.sh).
# Needs: GSYMPROF, LLVM_GSYMUTIL, fail(); optional CONVERT_ARGS (array) and
# LLVM_INPUT (what llvm-gsymutil converts, default the binary).
CONVERT_ARGS=()

# Expected lookup lines for the addresses in $1 (one per line) in file $2.
llvm_lookup() { sed "s|\$| $2|" "$1" | "$LLVM_GSYMUTIL" --addresses-from-stdin 2>&1 | sed '/^$/d'; }

# Addresses to check: function starts and ends, line rows, 3 random
# addresses inside each function, and a few outside everything.
addresses() {  # dump files...
  cat "$@" | perl -ne '
    BEGIN { srand(7) }
    if (/^FunctionInfo @ \S+: \[0x([0-9a-f]+) - 0x([0-9a-f]+)\)/) {
      my ($s, $e) = (hex $1, hex $2);
      printf "0x%x\n", $_ for ($s, $e);
      printf "0x%x\n", $s - 1 if $s > 0;
      if ($e > $s) { printf "0x%x\n", $s + int(rand($e - $s)) for 1 .. 3 }
    } elsif (/^  0x([0-9a-f]+) /) { printf "0x%x\n", hex $1 }
    END { print "0x0\n0x1\n0xffffffffffff\n" }' | sort -u
}

# "address name" of every FUNC symbol of an ELF, for the alias-choice rule.
symbols_at() { readelf -sW "$1" 2>/dev/null | perl -ane 'next unless ($F[3] // "") eq "FUNC"; $F[7] =~ s/@.*//; printf "%d %s\n", hex($F[1]), $F[7]'; }

compare() {  # binary label [ELF whose .symtab names the aliases]
  local bin=$1 label=$2 symbols_from=${3:-$1}
  "$GSYMPROF" gsym convert "$bin" -o "$bin.t1.gsym" --threads 1 "${CONVERT_ARGS[@]}" 2>conv.err ||
    { cat conv.err; fail "$label: convert --threads 1"; return; }
  "$GSYMPROF" gsym convert "$bin" -o "$bin.t4.gsym" --threads 4 "${CONVERT_ARGS[@]}" 2>/dev/null ||
    { fail "$label: convert --threads 4"; return; }
  cmp -s "$bin.t1.gsym" "$bin.t4.gsym" || fail "$label: --threads 1 and --threads 4 differ"
  "$LLVM_GSYMUTIL" --convert "${LLVM_INPUT:-$bin}" --out-file "$bin.llvm.gsym" --num-threads=1 >/dev/null 2>&1 ||
    { fail "$label: llvm-gsymutil --convert"; return; }
  "$LLVM_GSYMUTIL" "$bin.t1.gsym" >ours.dump 2>&1 || { fail "$label: llvm-gsymutil cannot dump our file"; return; }
  "$LLVM_GSYMUTIL" "$bin.llvm.gsym" >llvm.dump 2>&1
  addresses ours.dump llvm.dump >addrs
  llvm_lookup addrs "$bin.t1.gsym" | sed "s|$bin.t1.gsym|FILE|" >ours.txt
  llvm_lookup addrs "$bin.llvm.gsym" | sed "s|$bin.llvm.gsym|FILE|" >llvm.txt
  "$GSYMPROF" gsym lookup "$bin.t1.gsym" <addrs >ours.gp 2>&1
  "$GSYMPROF" gsym lookup "$bin.llvm.gsym" <addrs >llvm.gp 2>&1
  local n; n=$(wc -l <addrs)
  [[ $n -ge 40 ]] || { fail "$label: only $n addresses to check"; return; }
  if ! cmp -s ours.txt llvm.txt || ! cmp -s ours.gp llvm.gp; then
    # alias-choice: a differing single-frame answer naming another symbol at
    # the same function start, the rest of the answer (offset, file, line)
    # the same, is the documented rule; anything else fails.
    symbols_at "$symbols_from" >syms
    local bad
    bad=$(diff <(cat ours.txt ours.gp) <(cat llvm.txt llvm.gp) | perl -e '
      my %at; open(my $fh, "<", "syms") or die; while (<$fh>) { my ($a, $n) = split; $at{$n} = $a }
      my (%answer, %base);
      while (<STDIN>) {
        next if /^(---|[0-9])/;
        if (/^([<>]) 0x([0-9a-f]+): (\S+)((?: \+ (\d+))?.*)$/) {
          $answer{$1}{$2} = [$3, $4]; $base{$2} = hex($2) - ($5 // 0); next }
        print "unexplained: $_";
      }
      my %addresses = map { $_ => 1 } (keys %{$answer{"<"}}, keys %{$answer{">"}});
      for my $a (sort keys %addresses) {
        my ($o, $o_rest) = @{$answer{"<"}{$a} // ["(none)", ""]};
        my ($t, $t_rest) = @{$answer{">"}{$a} // ["(none)", ""]};
        print "differs at 0x$a: ours $o$o_rest, llvm $t$t_rest\n"
          unless $o ne $t && $o_rest eq $t_rest && exists $at{$o} && exists $at{$t} &&
                 $at{$o} == $at{$t} && $at{$o} == $base{$a};
      }')
    if [[ -n $bad ]]; then
      echo "$bad" | head -20
      diff ours.txt llvm.txt | head -20
      fail "$label: lookups differ"
      return
    fi
  fi
  if cmp -s "$bin.t1.gsym" "$bin.llvm.gsym"; then same="byte-identical to LLVM"; else same="same answers"; fi
  echo "ok: $label ($n addresses, $same)"
}


# agree INPUT PLAIN LABEL [convert args...]: converts INPUT (a dwz or split
# DWARF build) with gsymprof and PLAIN (the same program built without dwz or
# split DWARF) with llvm-gsymutil, and requires the same lookup, frame for
# frame (names, inline chains, files, lines), at every function start and
# end, every line row and random addresses inside functions of LLVM's file.
# The conversion must warn nothing. Counts into AGREED and CHECKED.
AGREED=0 CHECKED=0
agree() {
  local input=$1 plain=$2 label=$3; shift 3
  "$GSYMPROF" gsym convert "$input" -o agree.ours.gsym "$@" 2>conv.err || { cat conv.err; fail "$label: convert"; return; }
  if grep -q warning conv.err; then cat conv.err; fail "$label: unexpected warning"; return; fi
  "$LLVM_GSYMUTIL" --convert "$plain" --out-file agree.llvm.gsym --num-threads=1 >/dev/null 2>&1 ||
    { fail "$label: llvm-gsymutil --convert $plain"; return; }
  "$LLVM_GSYMUTIL" agree.llvm.gsym >agree.llvm.dump 2>&1
  addresses agree.llvm.dump >agree.addrs
  llvm_lookup agree.addrs agree.llvm.gsym | sed "s|agree.llvm.gsym|FILE|" >agree.llvm.txt
  llvm_lookup agree.addrs agree.ours.gsym | sed "s|agree.ours.gsym|FILE|" >agree.ours.txt
  local result
  result=$(perl -e '
    sub blocks { my (%b, $k); open(my $f, "<", $_[0]) or die; while (<$f>) { $k = $1 if /^(0x[0-9a-f]+): /; $b{$k} .= $_ if defined $k } %b }
    my %l = blocks($ARGV[0]); my %o = blocks($ARGV[1]); my ($n, $same) = (0, 0);
    for (keys %l) { $n++; $same++ if $l{$_} eq ($o{$_} // "") } print "$same $n\n"' agree.llvm.txt agree.ours.txt)
  local same=${result% *} n=${result#* }
  AGREED=$((AGREED + same)) CHECKED=$((CHECKED + n))
  [[ $n -ge 20 ]] || { fail "$label: only $n addresses to check"; return; }
  if [[ $same != "$n" ]]; then
    diff agree.llvm.txt agree.ours.txt | head -20
    fail "$label: $same of $n lookups agree with llvm-gsymutil on the plain build"
    return
  fi
  echo "ok: $label: $same/$n lookups agree with llvm-gsymutil on the plain build ($(sed 's/.*units (0 skipped), //' conv.err))"
}
