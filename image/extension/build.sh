#!/usr/bin/env bash
# Builds one system extension image (specs/extensions/README.md) inside the
# build root, for the image `make image` built (scripts/extensions.sh calls
# it):
#
#   build.sh [--tree DIR] [--version V] [--level L] [--key DIR | --unsigned] NAME [PACKAGE...]
#
# The Debian PACKAGEs and whatever they depend on that the image lacks, from
# the suites the image was built from, resolved against the image's own
# package database (/usr/lib/clawos/dpkg-status, kept there by
# image/mkosi.postinst.chroot): an extension never replaces a file of the
# verified root, it only adds beside it. DIR (--tree) is laid over the
# extension's /usr (the boot tests' servers from npm). Unpacked, not
# installed: no maintainer script runs, and only /usr goes in (systemd-sysext
# merges /usr alone here). The image is /out/extensions/NAME.raw: an erofs
# with its dm-verity hash tree and the root hash signed with the key in DIR
# (--key, default /out/extension-key: key.pem, cert.pem), and
# usr/lib/extension-release.d/extension-release.NAME, which ties it to the
# image's SYSEXT_LEVEL (--level takes another, for the test of a refusal).
set -euo pipefail
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:?}
die() { echo "extension: $*" >&2; exit 1; }

extra_tree='' version='' level='' key=/out/extension-key unsigned=0
while [[ ${1:-} == --* ]]; do
  case $1 in
    --tree) extra_tree=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --level) level=$2; shift 2 ;;
    --key) key=$2; shift 2 ;;
    --unsigned) unsigned=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
name=${1:?usage: build.sh [options] NAME [PACKAGE...]}; shift
# The name is the image's file name and its release file's suffix, which
# systemd-sysext requires to match; clawctl extension takes the same names.
[[ $name =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] || die "name '$name': lower-case letters, digits and '-'"
OS=/out/image/clawos-root
[[ -f $OS/usr/lib/clawos/dpkg-status ]] || die "no OS tree with its package database in $OS: run make image"
# shellcheck source=/dev/null  # the OS tree's os-release
level=${level:-$(. "$OS/usr/lib/os-release" && echo "${SYSEXT_LEVEL:?}")}
work=/out/extensions/work/$name
root=$work/root
rm -rf "$work"; mkdir -p "$root/usr"

if (( $# )); then
  # apt with a state of its own: the image's database as what is installed,
  # the image's suites as sources, downloads kept in the build root's cache.
  mkdir -p "$work/apt/lists/partial" /cache/extension-apt/archives/partial
  # The suites mkosi builds a Debian release from (main, its updates and
  # its security updates).
  cat > "$work/apt/sources.list" <<'SOURCES'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.debian.org/debian-security trixie-security main
SOURCES
  apt=(apt-get -q -o Debug::NoLocking=1 -o APT::Architecture=amd64 -o APT::Architectures::=amd64
       -o APT::Sandbox::User=root -o Acquire::Languages=none
       -o Dir::State="$work/apt" -o Dir::State::status="$OS/usr/lib/clawos/dpkg-status"
       -o Dir::Cache="$work/apt" -o Dir::Cache::archives=/cache/extension-apt/archives
       -o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
       -o Dir::Etc::Preferences=/nonexistent -o Dir::Etc::PreferencesParts=/nonexistent
       -o APT::Install-Recommends=false -o APT::Get::Assume-Yes=true
       # Not Debian's essential set: the image has what it needs of it.
       -o pkgCacheGen::Essential=none)
  "${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; die "apt-get update failed"; }
  "${apt[@]}" -s install "$@" > "$work/plan" 2>&1 || { cat "$work/plan"; die "apt cannot install $*"; }
  # An upgrade or a removal would change a package of the verified root.
  if grep -E '^(Inst [^ ]+ \[|Remv )' "$work/plan"; then
    die "$* would change packages of the image (above); build the image with them instead"
  fi
  # Inst NAME (VERSION SUITES [ARCH]), and " []" after a package of a
  # dependency loop.
  sed -nE 's/^Inst ([^ ]+) \(([^ ]+) .*\[([a-z0-9]+)\]\)( \[\])?$/\1 \2 \3/p' "$work/plan" | sort > "$work/packages"
  [[ $(wc -l < "$work/packages") == $(grep -c '^Inst ' "$work/plan") ]] || die "cannot read apt's plan $work/plan"
  [[ -s $work/packages ]] || die "the image has $* already"
  "${apt[@]}" install --download-only "$@" >>"$work/apt.log" 2>&1 || { cat "$work/apt.log"; die "cannot download $*"; }
  while read -r pkg ver arch; do
    deb=/cache/extension-apt/archives/${pkg}_${ver//:/%3a}_${arch}.deb
    [[ -f $deb ]] || die "apt downloaded no $deb"
    dpkg-deb -x "$deb" "$root"
  done < "$work/packages"
  version=${version:-$(awk -v p="$1" '$1 == p { print $2 }' "$work/packages")}
  # Packages not yet moved to /usr: the image's /bin, /lib are links into it.
  for d in bin sbin lib lib64; do
    if [[ -d $root/$d && ! -L $root/$d ]]; then
      mkdir -p "$root/usr/$d"; cp -a "$root/$d/." "$root/usr/$d/"; rm -rf "${root:?}/$d"
    fi
  done
fi
[[ -z $extra_tree ]] || cp -a "$extra_tree/." "$root/usr/"
version=${version:-1}
[[ $version =~ ^[0-9A-Za-z.:+~-]+$ ]] || die "version '$version'"

# Only /usr is merged; say what is left out (a package's /etc defaults).
for d in "$root"/*; do
  [[ $d == "$root/usr" ]] || { echo "extension $name: left out /${d#"$root"/} ($(find "$d" ! -type d | wc -l) files)" >&2; rm -rf "$d"; }
done
# As the image: no documentation, manual pages or translations, but each
# package's copyright file.
rm -rf "$root"/usr/share/{doc-base,man,info,locale,lintian,bug}
if [[ -d $root/usr/share/doc ]]; then
  find "$root/usr/share/doc" ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -depth -type d -empty -delete
fi

# Nothing may shadow a file of the root: the overlay would hide the
# verified file behind the extension's.
(cd "$root" && find usr ! -type d | sort) > "$work/files"
shadowed=$(while read -r f; do [[ -e $OS/$f || -L $OS/$f ]] && echo "/$f"; done < "$work/files" || true)
[[ -z $shadowed ]] || die "these files would shadow the image's: $shadowed"

mkdir -p "$root/usr/lib/extension-release.d" "$root/usr/share/clawos/extensions"
cat > "$root/usr/lib/extension-release.d/extension-release.$name" <<RELEASE
ID=clawos
SYSEXT_LEVEL=$level
SYSEXT_ID=$name
SYSEXT_VERSION_ID=$version
SYSEXT_SCOPE=system
ARCHITECTURE=x86-64
RELEASE
# What went in, for the operator: /usr/share/clawos/extensions/NAME.packages
# on the box once merged.
if [[ -s $work/packages ]]; then cp "$work/packages" "$root/usr/share/clawos/extensions/$name.packages"; fi
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

defs=$work/repart.d
mkdir -p "$defs"
cp /src/image/extension/repart.d/10-root.conf /src/image/extension/repart.d/20-root-verity.conf "$defs/"
signing=()
if (( ! unsigned )); then
  cp /src/image/extension/repart.d/30-root-verity-sig.conf "$defs/"
  [[ -f $key/key.pem && -f $key/cert.pem ]] || die "no key.pem and cert.pem in $key"
  signing=(--private-key="$key/key.pem" --certificate="$key/cert.pem")
fi
# Equal inputs, equal image: the partitions' UUIDs and the verity salt come
# from the seed.
seed=$(printf '%s\n' "$name" "$version" "$level" | sha256sum | cut -c1-32)
seed="${seed:0:8}-${seed:8:4}-${seed:12:4}-${seed:16:4}-${seed:20:12}"
rm -f "$work/image.raw"
systemd-repart --offline=yes --empty=create --size=auto --dry-run=no --json=short --seed="$seed" \
  --definitions="$defs" --copy-source="$root" "${signing[@]}" "$work/image.raw" > "$work/layout.json" 2> "$work/repart.log" ||
  { cat "$work/repart.log" >&2; die "systemd-repart could not make the image"; }
mv "$work/image.raw" "/out/extensions/$name.raw"
echo "extension $name $version (level $level): $(( $(stat -c %s "/out/extensions/$name.raw") / 1048576 )) MiB, $(wc -l < "$work/files") files" >&2
rm -rf "$root"
