#!/usr/bin/env bash
# The extension key (scripts/lib.sh: extension_key_dir): a release build
# refuses the throwaway key, a test build makes it once, and a directory
# given without both halves is refused. Run by tests/scripts/run.sh in a
# directory of its own.
source "$(dirname "$0")/../../scripts/lib.sh"
OUT=$PWD/out
unset CLAWOS_EXTENSION_KEY CLAWOS_RELEASE
fail() { echo "    $*"; exit 1; }

# A release build without CLAWOS_EXTENSION_KEY stops, and makes no key.
if (CLAWOS_RELEASE=1 extension_key_dir) > /dev/null 2> refused.txt; then
  fail "a release build without CLAWOS_EXTENSION_KEY went on with the throwaway key"
fi
grep -q 'needs CLAWOS_EXTENSION_KEY' refused.txt || fail "no clear error: $(cat refused.txt)"
[[ ! -e $OUT/extension-key ]] || fail "a release build made a throwaway key"

# A test build makes the throwaway key once: an X.509 certificate and its key.
dir=$(extension_key_dir 2>/dev/null) || fail "no throwaway key"
cert=$(sha256sum < "$dir/cert.pem")
[[ $(extension_key_dir 2>/dev/null) == "$dir" && $(sha256sum < "$dir/cert.pem") == "$cert" ]] || fail "a second call made another key"
[[ $(stat -c %a "$dir") == 700 ]] || fail "the key's directory is mode $(stat -c %a "$dir")"
openssl x509 -in "$dir/cert.pem" -noout -subject | grep -q 'ClawOS test extensions' || fail "no certificate in $dir/cert.pem"
[[ $(openssl x509 -in "$dir/cert.pem" -noout -pubkey) == $(openssl pkey -in "$dir/key.pem" -pubout) ]] ||
  fail "the certificate is not the key's"

# A key of one's own must have both halves.
mkdir half; cp "$dir/cert.pem" half/
if (CLAWOS_EXTENSION_KEY=$PWD/half extension_key_dir) > /dev/null 2> refused.txt; then fail "a directory without key.pem was taken"; fi
grep -q 'has no key.pem and cert.pem' refused.txt || fail "no clear error: $(cat refused.txt)"
