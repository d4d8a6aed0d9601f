#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios
# (@modelcontextprotocol/conformance, pinned in tests/mcp-servers and
# installed by `make mcp-servers` into out/mcp-servers) against ClawOS's MCP
# client (userspace/mcp, specs/mcp/README.md), played by
# clawos-mcp-conformance (src/main.rs): for each scenario the suite starts
# its server on loopback, runs the client with the server's URL, and judges
# the exchange. One scenario at a time, so each result is the suite's own
# verdict on that scenario, the client's exit status included (its
# parallel --suite mode ignores that status). Fails when a scenario fails,
# and when the suite lists a client scenario this file neither runs nor
# leaves out (a new version of the suite is read before it is trusted).
#
#   run.sh [CLIENT]   CLIENT: the clawos-mcp-conformance binary (default:
#                     the release build in the Makefile's CARGO_TARGET_DIR)
#
# A missing need (the suite in out/mcp-servers, node) fails under make test
# (CLAWOS_TEST_REQUIRE_ALL, as tests/require decides for cargo's tests) and
# is SKIPPED elsewhere.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
HERE=$REPO/tests/mcp-conformance

# The client scenarios run; src/main.rs plays each.
SCENARIOS=(initialize tools_call sse-retry)
# Run, and known to fail: the suite's baseline (--expected-failures) passes
# them while they fail and fails them once they pass, so an entry goes when
# the client is fixed. None now.
KNOWN_FAILURES=()
# Left out (shell patterns): they need what the client does not have.
#   elicitation-sep1034-client-defaults: elicitation, a server asking the
#   user for input through the client during a call; the client offers no
#   such capability (an agent has no user at hand mid-call).
#   auth/*: OAuth 2.1 (authorization server discovery, client registration,
#   the token endpoint, scopes); a remote server gets a fixed bearer token
#   from the vault (specs/mcp/README.md, `bearer_secret`) and nothing else.
LEFT_OUT=(elicitation-sep1034-client-defaults 'auth/*')

client=${1:-${CARGO_TARGET_DIR:-$CACHE/cargo-target}/release/clawos-mcp-conformance}
servers=${CLAWOS_MCP_SERVERS:-$OUT/mcp-servers}
entry=$servers/node_modules/@modelcontextprotocol/conformance/dist/index.js

# missing REASON: fails under make test, says SKIPPED elsewhere (tests/require).
missing() {
  [[ -z ${CLAWOS_TEST_REQUIRE_ALL+set} ]] || die "mcp conformance: $1 (required under make test, CLAWOS_TEST_REQUIRE_ALL=1)"
  echo "SKIPPED mcp conformance: $1" >&2
  exit 0
}
# The client is what is under test, not a need of the machine: never skipped.
[[ -x $client ]] || die "no client at $client (make test-mcp-conformance builds it)"
# The suite runs the command it is given split at spaces.
[[ $client != *[[:space:]]* ]] || die "the client's path holds a space, which the suite would split: $client"
[[ -f $entry ]] || missing "no $entry (run \`make mcp-servers\`)"
command -v node >/dev/null || missing "no node on PATH"
(( $(node -p 'process.versions.node.split(".")[0]') >= 20 )) || die "the conformance suite needs Node.js 20 or later, found $(node --version)"
suite=(node)
if [[ $(node -p 'typeof require("node:fs").globSync') != function ]]; then
  suite+=(--import "$HERE/node20/register.mjs")
fi
suite+=("$entry")

# Every client scenario of the suite is run or left out, by name.
mapfile -t listed < <("${suite[@]}" list --client | sed -n 's/^  - \([^ ]*\) .*/\1/p')
(( ${#listed[@]} > 0 )) || die "mcp conformance: the suite listed no client scenarios"
unplaced=()
for scenario in "${listed[@]}"; do
  placed=0
  for pattern in "${SCENARIOS[@]}" "${LEFT_OUT[@]}"; do
    # shellcheck disable=SC2053  # the right side is a pattern on purpose
    [[ $scenario == $pattern ]] && placed=1
  done
  (( placed )) || unplaced+=("$scenario")
done
(( ${#unplaced[@]} == 0 )) || die "mcp conformance: the suite has client scenarios run.sh neither runs nor leaves out: ${unplaced[*]}"

tmp=$(mktemp -d /tmp/clawos-mcp-conformance.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=() known=() failed=()
for scenario in "${SCENARIOS[@]}"; do
  args=(client --command "$client" --scenario "$scenario")
  expected=0
  for name in "${KNOWN_FAILURES[@]}"; do [[ $name == "$scenario" ]] && expected=1; done
  if (( expected )); then
    printf 'client:\n  - %s\n' "$scenario" > "$tmp/baseline.yml"
    args+=(--expected-failures "$tmp/baseline.yml")
  fi
  # The suite's report of a scenario is long: shown when it fails.
  if "${suite[@]}" "${args[@]}" > "$tmp/report" 2>&1; then
    if (( expected )); then known+=("$scenario"); else passed+=("$scenario"); fi
  else
    cat "$tmp/report" >&2
    failed+=("$scenario")
  fi
done

echo "mcp conformance: ${#passed[@]} passed, ${#known[@]} failed as known${known[*]:+ (${known[*]})}," \
  "${#failed[@]} failed${failed[*]:+ (${failed[*]})} of ${#SCENARIOS[@]} client scenarios run;" \
  "$(( ${#listed[@]} - ${#SCENARIOS[@]} )) left out (tests/mcp-conformance/run.sh says why)"
(( ${#failed[@]} == 0 ))
