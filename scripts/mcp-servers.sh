#!/usr/bin/env bash
# Installs the MCP servers the client's tests run (userspace/mcp/tests), from
# the npm registry: tests/mcp-servers/package-lock.json pins each package's
# version and its integrity hash, and `npm ci` refuses a package whose hash
# differs. Into out/mcp-servers, again only when the lock changed.
source "$(dirname "$0")/lib.sh"
SRC=$REPO/tests/mcp-servers
DEST=$OUT/mcp-servers

# Debian's own when the machine has none (a machine image may carry another
# Node.js, whose bundled npm Debian's npm package would conflict with, so
# this is not in scripts/deps.sh's list).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm \
    || die "the MCP test servers need node and npm: apt-get install nodejs npm failed"
fi
(( $(node -p 'process.versions.node.split(".")[0]') >= 18 )) \
  || die "the MCP test servers need Node.js 18 or later, found $(node --version)"
key=$(hash_inputs "$SRC/package.json" "$SRC/package-lock.json")
[[ $(cat "$DEST/.key" 2>/dev/null) == "$key" ]] && exit 0
rm -rf "$DEST.tmp"; mkdir -p "$DEST.tmp"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST.tmp/"
# --ignore-scripts: no package runs code at install time.
(cd "$DEST.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
  || die "npm ci in $DEST.tmp failed"
echo "$key" > "$DEST.tmp/.key"
rm -rf "$DEST"; mv "$DEST.tmp" "$DEST"
log "MCP test servers in $DEST: $(node -p "require('$DEST/node_modules/@modelcontextprotocol/server-everything/package.json').version" ) (server-everything)"
