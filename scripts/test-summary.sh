#!/usr/bin/env bash
# test-summary.sh LOG: what a `cargo test` run did, from its output: tests
# passed, failed and ignored (with the reasons given by #[ignore]), and the
# SKIPPED lines of tests whose need was missing (tests/require). Fails when
# any test failed or skipped: under make test a skip is a test that did not
# run, and the run must say so in red.
set -euo pipefail
log=${1:?usage: test-summary.sh LOG}
read -r passed failed ignored < <(awk '/^test result:/ {p += $4; f += $6; i += $8} END {print p + 0, f + 0, i + 0}' "$log")
skipped=$(grep -c '^SKIPPED ' "$log" || true)
echo "unit tests: $passed passed, $failed failed, $ignored ignored, $skipped skipped"
# #[ignore] marks the PostgreSQL tests (make test-pg runs them) and the
# entry points of child processes other tests start: not skips.
grep -oE '^test .* \.\.\. ignored, .*' "$log" | sed 's/^test \(.*\) \.\.\. ignored, \(.*\)/  ignored: \1 (\2)/' || true
grep '^SKIPPED ' "$log" | sed 's/^/  /' || true
(( failed == 0 && skipped == 0 ))
