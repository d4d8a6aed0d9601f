#!/usr/bin/env bash
# `make lint` (part of `make test`): the style the tools hold, so reviews can
# be about design. Fails on the first finding of any of them:
#   - rustfmt (rustfmt.toml) over the three Rust workspaces: the root one,
#     ebpf/ and userspace/wasm-tools (rustfmt needs no compiler, so the host's
#     formats the build root's workspaces too);
#   - clippy over the root workspace, every target, warnings denied, with the
#     lints set once in Cargo.toml ([workspace.lints]); and over ebpf/ and
#     the WASM tools in the build root, with its Debian rustc and the
#     clippy built with it (they build only there: targets the host
#     toolchain has no standard library for);
#   - shellcheck (.shellcheckrc) over every shell script: *.sh and the files
#     whose first line runs a shell.
#   - no env!("CARGO_MANIFEST_DIR") in Rust code: the shared target directory
#     (scripts/source-mtimes.py) lets a clone reuse binaries another checkout
#     built, and a path fixed at compile time would send a test to that
#     checkout's files; tests read the run-time variable, which cargo sets.
source "$(dirname "$0")/lib.sh"
cd "$REPO"
log "lint: rustfmt"
for ws in . ebpf userspace/wasm-tools; do
  (cd "$ws" && cargo fmt --all --check) || die "lint: $ws is not formatted as rustfmt.toml says (cargo fmt --all in $ws)"
done
log "lint: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings || die "lint: clippy found the above"
# In the build root's cargo targets, which make ebpf and make tools share.
"$REPO/scripts/in-buildroot.sh" sh -c '
  set -e
  cd /src/ebpf
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=/cache/target-ebpf cargo clippy --release --locked --workspace -- -D warnings
  cd /src/userspace/wasm-tools
  CARGO_TARGET_DIR=/cache/target-wasm-tools cargo clippy --release --locked --workspace --all-targets -- -D warnings' ||
  die "lint: clippy found the above in ebpf/ or userspace/wasm-tools"
if git grep -n 'env!("CARGO_MANIFEST_DIR")' -- '*.rs'; then
  die 'lint: env!("CARGO_MANIFEST_DIR") names the checkout that built the binary: use std::env::var_os("CARGO_MANIFEST_DIR") at run time'
fi
log "lint: shellcheck"
mapfile -t scripts < <(git ls-files | while read -r f; do
  [[ -f $f ]] || continue
  if [[ $f == *.sh ]] || head -n 1 "$f" | grep -qE '^#!.*\b(ba|da)?sh\b'; then echo "$f"; fi
done)
shellcheck "${scripts[@]}" || die "lint: shellcheck found the above"
log "lint: ${#scripts[@]} shell scripts, three Rust workspaces: clean"
