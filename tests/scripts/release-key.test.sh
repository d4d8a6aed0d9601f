#!/usr/bin/env bash
# The release key (scripts/lib.sh: release_gnupghome, release_key): a
# release build refuses the throwaway key, a GnuPG home with more than one
# secret key is refused, and the key of a home with one is what the image
# trusts, alone. Run by tests/scripts/run.sh in a directory of its own.
source "$(dirname "$0")/../../scripts/lib.sh"
OUT=$PWD/out
unset CLAWOS_RELEASE_KEY CLAWOS_RELEASE
fail() { echo "    $*"; exit 1; }
newkey() { # HOME NAME: a signing key named NAME in GnuPG home HOME
  mkdir -p "$1"; chmod 0700 "$1"
  gpg --homedir "$1" --batch --quiet --pinentry-mode loopback --passphrase '' \
    --quick-generate-key "$2 <$2@clawos.invalid>" ed25519 sign never
}

# A release build without CLAWOS_RELEASE_KEY stops, and makes no key.
if (CLAWOS_RELEASE=1 release_gnupghome) > /dev/null 2> refused.txt; then
  fail "a release build without CLAWOS_RELEASE_KEY went on with the throwaway key"
fi
grep -q 'needs CLAWOS_RELEASE_KEY' refused.txt || fail "no clear error: $(cat refused.txt)"
[[ ! -e $OUT/release-key ]] || fail "a release build made a throwaway key"

# A test build makes the throwaway key once, and it is the release key.
home=$(release_gnupghome 2>/dev/null)
key=$(release_key "$home") || fail "the throwaway home's key was refused"
[[ $(release_gnupghome 2>/dev/null) == "$home" && $(release_key "$home") == "$key" ]] ||
  fail "a second call made another key"

# A home with a second secret key is refused, not exported whole.
newkey "$PWD/two" first; newkey "$PWD/two" second
if (release_key "$PWD/two") > /dev/null 2> refused.txt; then fail "a home with two secret keys was taken"; fi
grep -q 'holds 2 secret keys' refused.txt || fail "no clear error: $(cat refused.txt)"

# What the image trusts: exactly that key, even when the home also holds
# others' public keys.
gpg --homedir "$PWD/two" --export > others.gpg
gpg --homedir "$home" --batch --quiet --import others.gpg
gpg --homedir "$home" --export "$key" > pubring.gpg
pubs=$(gpg --homedir "$home" --batch --with-colons --show-keys pubring.gpg | awk -F: '$1 == "pub" { n++ } END { print n + 0 }')
[[ $pubs == 1 ]] || fail "the exported keyring holds $pubs keys"
gpg --homedir "$home" --batch --with-colons --show-keys pubring.gpg | grep -q ":$key:" || fail "the exported key is not the release key"
