#!/usr/bin/env bash
# `make update-artifacts`: the files of an update of the image `make image`
# built, as another version (specs/update/README.md):
#
#   out/update/<version>/clawos_<version>_<uuid>.root.raw.gz         root slot
#   out/update/<version>/clawos_<version>_<uuid>.root-verity.raw.gz  its hash tree
#   out/update/<version>/clawos_<version>.efi                         the UKI
#   out/update/<version>/SHA256SUMS, SHA256SUMS.gpg                   signed list
#
# UPDATE_VERSION= names the version (default: clawos_version); a version is
# sealed from the image's OS tree with its os-release rewritten, so an
# update differs from the image in its version, root hash and UKI.
# UPDATE_EXTRA_TREE= lays a directory over the tree first (the boot test's
# broken version). The <uuid>s are the partition UUIDs the UKI's
# dm-mod.create= table names, which systemd-sysupdate gives the partitions
# it writes.
source "$(dirname "$0")/lib.sh"
version=${UPDATE_VERSION:-$(clawos_version)}
[[ $version =~ ^[0-9][0-9A-Za-z.]*$ ]] || die "UPDATE_VERSION '$version': digits and dots, starting with a digit"
[[ -d $OUT/image/clawos-root/usr ]] || die "no OS tree in $OUT/image/clawos-root: run make image"
dest="$OUT/update/$version"
tree="$OUT/update/tree"
started=$(date +%s.%N)
rm -rf "$tree" "$dest"; mkdir -p "$dest"
cp -a "$OUT/image/clawos-root" "$tree"
if [[ -n ${UPDATE_EXTRA_TREE:-} ]]; then cp -a "$UPDATE_EXTRA_TREE"/. "$tree"/; fi
sed -i -e "s/^IMAGE_VERSION=.*/IMAGE_VERSION=$version/" -e "s/^PRETTY_NAME=\"ClawOS [^ ]*/PRETTY_NAME=\"ClawOS $version/" "$tree/usr/lib/os-release"
echo "update $version ${UPDATE_EXTRA_TREE:+with $UPDATE_EXTRA_TREE}" >> "$tree/usr/lib/clawos/build-inputs"

bash "$REPO/scripts/in-buildroot.sh" env SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:?}" \
  bash /src/image/seal.sh /out/update/tree "/out/update/$version/sealed"
rm -rf "$tree"
# shellcheck source=/dev/null  # written by seal.sh: root_partuuid, verity_partuuid
source "$dest/sealed/sealed.env"
# shellcheck disable=SC2154  # set by sealed.env, which shellcheck cannot see
: "${root_partuuid:?}" "${verity_partuuid:?}"
cd "$dest"
# gzip: the partitions are padded to the slot size, and the erofs in the
# root is compressed already (lz4hc), so gzip -1 takes out the padding in
# 20 s where xz -6 takes 90 s to save another 12 % (333 MiB against 291 MiB
# for today's root, measured by hand on the 2-core build machine); and a
# small box unpacks gzip faster as it writes the slot. systemd-pull detects
# the format itself.
gzip -1 -c sealed/clawos.root.raw > "clawos_${version}_${root_partuuid}.root.raw.gz"
gzip -1 -c sealed/clawos.root-verity.raw > "clawos_${version}_${verity_partuuid}.root-verity.raw.gz"
cp sealed/clawos.efi "clawos_${version}.efi"
rm -rf sealed
sha256sum clawos_* > SHA256SUMS
home=$(release_gnupghome)
key=$(release_key "$home")
# The key itself ("!"), not a subkey gpg would pick.
gpg --homedir "$home" --batch --yes --pinentry-mode loopback --passphrase '' \
  --local-user "$key!" --detach-sign --output SHA256SUMS.gpg SHA256SUMS
log "update $version in $dest: $(du -cm --apparent-size clawos_* | tail -n 1 | cut -f1) MiB to download, built in $(printf '%.0f' "$(echo "$(date +%s.%N) - $started" | bc)") s"
