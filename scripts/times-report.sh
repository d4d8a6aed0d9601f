#!/usr/bin/env bash
# times-report.sh TIMES LAST: what a test run's time went into, printed at
# the end of `make test` (and of `make test-vm` run alone). TIMES has one
# line per step of make test, phase of the boot suite or boot check:
#   step|phase|check <TAB> seconds <TAB> name
# Prints the steps and phases, the ten slowest checks, and what took longer
# than in LAST, the figures of the last run that got this far, which this
# run's then replace. Growth is reported, never a failure: timings on
# emulated machines vary by tens of percent from run to run, so only growth
# of 10 s and 20 % or more is named, to keep the list to the news.
set -euo pipefail
times=${1:?usage: times-report.sh TIMES LAST} last=${2:?usage: times-report.sh TIMES LAST}
table() { awk -F'\t' -v kind="$1" '$1 == kind { printf "  %6d  %s\n", $2, $3 }'; }
if grep -q '^step' "$times"; then echo "make test steps (s):"; table step < "$times"; fi
echo "boot suite phases (s):"; table phase < "$times"
echo "the ten slowest boot checks (s):"
# sed, not head: head stops reading after ten lines, and sort, still writing,
# would die of SIGPIPE and fail the report under pipefail (it did once).
grep '^check' "$times" | sort -t$'\t' -k2,2nr | sed -n '1,10p' | table check
if [[ -s $last ]]; then
  echo "grown since the last run (s, then -> now):"
  awk -F'\t' 'NR == FNR { was[$1 FS $3] = $2; next }
    ($1 FS $3) in was && $2 - was[$1 FS $3] >= 10 && $2 >= 1.2 * was[$1 FS $3] {
      printf "  %6d -> %-6d %s %s\n", was[$1 FS $3], $2, $1, $3; n++ }
    END { if (!n) print "  nothing" }' "$last" "$times"
fi
mkdir -p "$(dirname "$last")"
cp "$times" "$last"
