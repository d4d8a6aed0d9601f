# shellcheck shell=bash
# The system extensions the boot checks install (checks/72-extensions.sh,
# checks/72-mcp.sh; specs/extensions/README.md), built beside boot 1 in the
# lane of run.sh: the product's (make extensions: nodejs, python), and the
# test's own, all in $VMS/extensions:
#
#   mcp-test-servers  the MCP servers from npm and PyPI (make mcp-servers)
#                     under /usr/lib/clawos-test-mcp, signed: test tools,
#                     brought in over SSH, never part of the image
#   test-unsigned     one file, no signature
#   test-other-key    one file, signed with a key the image does not trust
#   test-other-level  one file, signed, for another extension level
#
# extensions_wait blocks a check until they are there.
EXTENSIONS_DIR="$VMS/extensions"
# Where the test's servers are in the guest once mcp-test-servers is merged.
# shellcheck disable=SC2034  # read by the check files
TEST_MCP=/usr/lib/clawos-test-mcp

extension_build() { # OPTION... NAME
  bash "$REPO/scripts/in-buildroot.sh" env SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:?}" \
    bash /src/image/extension/build.sh "$@" && mv "$OUT/extensions/${*: -1}.raw" "$EXTENSIONS_DIR/"
}

# extensions_build: all six into $EXTENSIONS_DIR; built.s (seconds taken)
# once they are there, failed if they will not be.
extensions_build() {
  extensions_make || { : > "$EXTENSIONS_DIR/failed"; return 1; }
}

extensions_make() {
  local t0=$SECONDS locations servers="$VMS/extension-servers" tiny="$VMS/extension-tiny" other="$VMS/extension-other-key"
  rm -rf "$EXTENSIONS_DIR" "$servers" "$tiny" "$other"; mkdir -p "$EXTENSIONS_DIR"
  bash "$REPO/scripts/extensions.sh" && cp "$OUT/extensions/nodejs.raw" "$OUT/extensions/python.raw" "$EXTENSIONS_DIR/" || return 1
  mkdir -p "$servers/lib/clawos-test-mcp" "$tiny/share/clawos-test" "$other"
  # The two reference servers and what they need, not the conformance
  # suite installed beside them (it runs on the host): 30 MB less to push.
  locations=$(cd "$OUT/mcp-servers" && npm query "$(printf '#@modelcontextprotocol/server-%s, #@modelcontextprotocol/server-%s *, ' \
    everything everything filesystem filesystem | sed 's/, $//')" | jq -r '.[].location' | sort -u) && [[ -n $locations ]] || return 1
  # shellcheck disable=SC2086  # one path per word: package locations have no spaces
  tar -C "$OUT/mcp-servers" -cf - $locations | tar -xf - -C "$servers/lib/clawos-test-mcp" &&
    cp -a "$OUT/mcp-servers-python" "$servers/lib/clawos-test-mcp/python" || return 1
  echo "a file of a test extension" > "$tiny/share/clawos-test/file"
  openssl req -x509 -newkey rsa:3072 -nodes -days 1 -subj "/CN=not the ClawOS extension key" \
    -keyout "$other/key.pem" -out "$other/cert.pem" 2>/dev/null || return 1
  extension_build --tree "/out/${servers#"$OUT"/}" mcp-test-servers &&
    extension_build --unsigned --tree "/out/${tiny#"$OUT"/}" test-unsigned &&
    extension_build --key "/out/${other#"$OUT"/}" --tree "/out/${tiny#"$OUT"/}" test-other-key &&
    extension_build --level 0000000000000000 --tree "/out/${tiny#"$OUT"/}" test-other-level || return 1
  rm -rf "$servers" "$tiny" "$other" "$OUT/extensions/work"
  echo "$((SECONDS - t0))" > "$EXTENSIONS_DIR/built.s"
}

# extensions_wait: until the lane has built them (at most 10 minutes).
extensions_wait() {
  local waited=0
  until [[ -s $EXTENSIONS_DIR/built.s ]]; do
    if (( waited >= 600 )) || [[ -e $EXTENSIONS_DIR/failed ]]; then
      echo "the extensions were not built (lane log: $VMS/lane-tampered-usb-updates.log)"; return 1
    fi
    sleep 2; waited=$((waited + 2))
  done
}
