#!/usr/bin/env bash
# `make test-scripts` (part of `make test`): the tests of the build's own
# shell functions (scripts/lib.sh), each tests/scripts/*.test.sh run in
# turn in a directory of its own. A test file fails by exiting non-zero;
# every file runs, and the step fails if any did.
source "$(dirname "$0")/../../scripts/lib.sh"
failed=0 passed=0
for test in "$REPO"/tests/scripts/*.test.sh; do
  dir=$(mktemp -d)
  if (cd "$dir" && bash "$test"); then
    passed=$((passed + 1)); echo "  ok   $(basename "$test")"
  else
    failed=$((failed + 1)); echo "  FAIL $(basename "$test")"
  fi
  rm -rf "$dir"
done
echo "script tests: $passed passed, $failed failed"
((passed > 0 && failed == 0))
