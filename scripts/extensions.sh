#!/usr/bin/env bash
# `make extensions`: the system extensions an operator may install on the
# box built by `make image` (specs/extensions/README.md), in out/extensions:
#
#   nodejs.raw   Debian's Node.js, for MCP servers from npm
#   python.raw   Debian's Python 3, for MCP servers from PyPI
#
# Each signed with the extension key (lib.sh, extension_key_dir) for the
# image's extension level. Built by image/extension/build.sh in the build
# root, and cached by the digest of its inputs (the build script and
# definitions, the image's package database, the packages asked for, the
# key's certificate): the packages are the newest the suites had when the
# entry was made, as mkosi's package cache keeps the image's.
source "$(dirname "$0")/lib.sh"
EXTENSIONS=(
  "nodejs nodejs"
  "python python3"
)
[[ -f $OUT/image/clawos-root/usr/lib/clawos/dpkg-status ]] || die "no OS tree in $OUT/image/clawos-root: run make image"
keydir=$(extension_key_dir)
mkdir -p "$OUT/extensions" "$CACHE/extensions"
# The build root sees out/ alone: a key kept elsewhere (CLAWOS_EXTENSION_KEY)
# is lent to it for the build, then removed.
case $keydir in
  "$OUT"/*) key_in_root=/out/${keydir#"$OUT"/} ;;
  *) rm -rf "$OUT/extensions/key"; mkdir -m 0700 "$OUT/extensions/key"
     trap 'rm -rf "$OUT/extensions/key"' EXIT
     install -m 0600 "$keydir/key.pem" "$keydir/cert.pem" "$OUT/extensions/key/"
     key_in_root=/out/extensions/key ;;
esac
for entry in "${EXTENSIONS[@]}"; do
  read -ra parts <<<"$entry"
  name=${parts[0]}
  key=$( { hash_inputs "$REPO/image/extension/build.sh" "$REPO"/image/extension/repart.d/* \
             "$OUT/image/clawos-root/usr/lib/clawos/dpkg-status" "$keydir/cert.pem"
           echo "${parts[*]}"; } | sha256sum | cut -c1-16)
  cached="$CACHE/extensions/$name-$key.raw"
  if [[ ! -f $cached ]]; then
    t0=$SECONDS
    bash "$REPO/scripts/in-buildroot.sh" env SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:?}" \
      bash /src/image/extension/build.sh --key "$key_in_root" "${parts[@]}"
    # One entry per extension: the one these inputs make.
    rm -f "$CACHE/extensions/$name"-*.raw
    mv "$OUT/extensions/$name.raw" "$cached"
    log "extension $name built in $((SECONDS - t0)) s"
  fi
  cp --reflink=auto "$cached" "$OUT/extensions/$name.raw"
done
rm -rf "$OUT/extensions/work"
log "extensions in $OUT/extensions: $(cd "$OUT/extensions" && echo *.raw)"
