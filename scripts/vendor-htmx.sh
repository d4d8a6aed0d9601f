#!/usr/bin/env bash
# Fetches the console's vendored scripts again from the npm registry,
# checks each tarball against its pinned npm integrity hash, and compares
# the files in userspace/console/static/ (its README.md pins them).
# Run by hand when moving to a new release; the tests check the files' own
# SHA-256 on every run.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
STATIC="$REPO/userspace/console/static"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# package@version, its tarball's npm integrity, the file inside, its name here.
while read -r package integrity inside name; do
  tarball="$work/${package//\//_}.tgz"
  curl -fsSL --retry 3 -o "$tarball" "https://registry.npmjs.org/${package%@*}/-/${package%@*}-${package##*@}.tgz"
  actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
  [[ $actual == "$integrity" ]] || { echo "$package: integrity $actual, pinned $integrity" >&2; exit 1; }
  tar -xzf "$tarball" -C "$work" "$inside"
  cmp "$work/$inside" "$STATIC/$name" || { echo "$name differs from $package's $inside" >&2; exit 1; }
  rm -rf "$work/package"
  echo "$name: $package, integrity checked, same file"
done <<'PINS'
htmx.org@2.0.11 sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA== package/dist/htmx.min.js htmx.min.js
htmx-ext-sse@2.2.4 sha512-LJmxVhykyflBWgh5PvbRidcyuqMHlgfajmmzumvKctv9puvsufeH6OaejSMZTNTnEI8O2wXXn4ZZtBdpEMqmEQ== package/dist/sse.min.js sse.min.js
PINS
