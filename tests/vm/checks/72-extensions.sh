# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# System extensions (specs/extensions/README.md), built beside this boot by
# tests/vm/extensions.sh: nodejs and python (make extensions) and the
# test's servers (mcp-test-servers) installed with clawctl and merged over
# /usr, which 72-mcp.sh's servers then run from; images that are unsigned,
# signed with another key or built for another level refused by the
# install's trial merge, and by the boot's own merge. After the reboot
# (after-reboot/73-extensions.sh) and the update (tests/vm/update.sh, U3)
# they are merged again.
EXT_PUSHED=/run/clawos-test/extensions

check_extensions_installed() {
  local name
  extensions_wait && vm_ssh "mkdir -p $EXT_PUSHED" || return 1
  for name in nodejs python mcp-test-servers test-unsigned test-other-key test-other-level; do
    vm_push "$EXTENSIONS_DIR/$name.raw" "$EXT_PUSHED/$name.raw" || return 1
  done
  vm_ssh "TEST_MCP=$TEST_MCP"'
    set -e
    if command -v node || command -v python3; then echo "the image has a runtime of its own"; exit 1; fi
    start=$(date +%s%N)
    cd /run/clawos-test/extensions && clawctl extension install nodejs.raw python.raw mcp-test-servers.raw
    echo $(( ($(date +%s%N) - start) / 1000000 )) > /run/clawos-test/extension-install-ms
    list=$(clawctl extension list --json)
    echo "$list" | jq -e "[.extensions[] | select(.merged) | .name] == [\"mcp-test-servers\", \"nodejs\", \"python\"]
                          and ([.extensions[] | select(.name == \"nodejs\")][0].version | startswith(\"20.\"))" >/dev/null || { echo "$list"; exit 1; }
    # The runtimes work from the merged /usr, linking the image'"'"'s own libraries.
    node -e "require(\"crypto\").createHash(\"sha256\"); console.log(process.version)"
    python3 -c "import ssl, sqlite3; print(ssl.OPENSSL_VERSION)"
    test -f $TEST_MCP/node_modules/@modelcontextprotocol/server-everything/dist/index.js
    PYTHONPATH=$TEST_MCP/python python3 -c "import mcp_server_time"
    # /usr is read-only still.
    if touch /usr/bin/clawos-test 2>/dev/null; then echo "/usr is writable"; exit 1; fi'
}
check "extensions: nodejs, python and the test's servers install with clawctl extension, merge over /usr, and their runtimes run" check_extensions_installed
log "extensions: the install of the three (copies, trial merges, one merge), under emulation: $(vm_ssh 'cat /run/clawos-test/extension-install-ms' 2>/dev/null) ms"

check_extensions_refused() {
  vm_ssh '
    set -e
    installed=$(ls /var/lib/extensions)
    refused() { # NAME WHAT-SYSTEMD-SAID
      if out=$(clawctl extension install /run/clawos-test/extensions/$1.raw 2>&1); then echo "$1 was installed: $out"; exit 1; fi
      echo "$out" | grep -q "$2" || { echo "$1: $out"; exit 1; }
      [ "$(ls /var/lib/extensions)" = "$installed" ] || { echo "$1 changed /var/lib/extensions"; ls /var/lib/extensions; exit 1; }
      clawctl extension list --json | jq -e "[.extensions[] | select(.merged)] | length == 3" >/dev/null
    }
    refused test-unsigned "does not match image policy"
    refused test-other-key "signer certificate not found"
    refused test-other-level "is for API level .0000000000000000"
    # One refused among several, and none is installed.
    if out=$(clawctl extension install /run/clawos-test/extensions/nodejs.raw /run/clawos-test/extensions/test-unsigned.raw 2>&1); then
      echo "a set with an unsigned image was installed: $out"; exit 1
    fi
    echo "$out" | grep -q "no extension was installed: test-unsigned is not installed" || { echo "$out"; exit 1; }
    [ "$(ls /var/lib/extensions)" = "$installed" ] && [ -z "$(ls /var/lib/clawos/extension-staging)" ] ||
      { ls /var/lib/extensions /var/lib/clawos/extension-staging; exit 1; }
    node --version >/dev/null
    # Past clawctl, by hand: the boot'"'"'s own merge refuses an unsigned
    # image too, and with it every other (which is why the install tries
    # an image alone first).
    cp /run/clawos-test/extensions/test-unsigned.raw /var/lib/extensions/
    if systemctl restart systemd-sysext.service 2>/dev/null; then echo "systemd-sysext merged an unsigned image"; exit 1; fi
    if test -e /usr/bin/node; then echo "merged with an unsigned image among them"; exit 1; fi
    rm /var/lib/extensions/test-unsigned.raw
    systemctl restart systemd-sysext.service
    node --version >/dev/null'
}
check "extensions: an unsigned image, one signed with another key and one for another level are refused by the install and leave the installed set as it was, as does a set with one of them; the boot's merge refuses an unsigned image too" check_extensions_refused
