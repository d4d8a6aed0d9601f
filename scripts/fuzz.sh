#!/usr/bin/env bash
# make fuzz: runs the IPC decoder's fuzz target (userspace/ipc/fuzz, the
# framing reader and the decoder on arbitrary bytes) under libFuzzer for
# FUZZ_SECONDS (default 300), and prints the executions and crashes.
#
# libFuzzer targets need nightly rustc (`-Zsanitizer`, the sancov pass):
# the rustup nightly these build machines carry, the one a fresh machine has
# after `make deps` (which installs no Rust). The flags are the ones
# cargo-fuzz passes, written out so nothing more needs installing.
#
# The corpus is kept in the repository (userspace/ipc/fuzz/corpus/decode:
# the protocol spec's examples as seeds, plus every input the runs found to
# reach new code): commit what a run adds. A crash leaves its input in
# out/fuzz/ and fails the target, and so does a run of fewer than 100
# inputs a second.
source "$(dirname "$0")/lib.sh"
seconds="${FUZZ_SECONDS:-300}"
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die "FUZZ_SECONDS must be a positive number of seconds, not '$seconds'"
rustc +nightly --version >/dev/null 2>&1 \
  || die "make fuzz needs rustup's nightly toolchain (rustc +nightly); this machine has: $(rustup toolchain list 2>&1 | tr '\n' ' ')"
FUZZ="$REPO/userspace/ipc/fuzz"
target_dir="$CACHE/fuzz-target"
triple=x86_64-unknown-linux-gnu
log "building the fuzz target (nightly, ASan, sanitizer coverage)"
# --target keeps these flags off the build scripts, as cargo-fuzz does.
(cd "$FUZZ" && CARGO_TARGET_DIR="$target_dir" RUSTFLAGS="-Cpasses=sancov-module \
  -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
  -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares \
  --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Zsanitizer=address" \
  cargo +nightly build --release --locked --target "$triple" --bin decode)
rm -rf "$OUT/fuzz"
mkdir -p "$OUT/fuzz"
log "fuzzing the IPC decoder for ${seconds}s"
set +e
"$target_dir/$triple/release/decode" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$OUT/fuzz/" "$FUZZ/corpus/decode" 2>&1 | tee "$OUT/fuzz/decode.log" | grep -v '^#[0-9]'
status=${PIPESTATUS[0]}
set -e
# Keep the smallest set of inputs that covers what the corpus covers.
if [[ $status -eq 0 ]]; then
  minimal="$(mktemp -d)"
  "$target_dir/$triple/release/decode" -merge=1 "$minimal" "$FUZZ/corpus/decode" >"$OUT/fuzz/merge.log" 2>&1 \
    || die "merging the corpus failed: $OUT/fuzz/merge.log"
  find "$FUZZ/corpus/decode" -type f -delete
  mv "$minimal"/* "$FUZZ/corpus/decode/"
  rmdir "$minimal"
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/fuzz/decode.log" | grep -o '[0-9]*$')
crashes=$(find "$OUT/fuzz" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
log "fuzz: ${runs:-0} executions in ${seconds}s, $crashes crash(es), corpus $(find "$FUZZ/corpus/decode" -maxdepth 1 -type f | wc -l) inputs"
[[ $status -eq 0 && $crashes -eq 0 ]] || die "the fuzz target failed (exit $status); inputs in $OUT/fuzz/"
# A run that barely executed tested nothing: runs of this target reach about
# 1,500 inputs a second on the 2-core build machine (`FUZZ_SECONDS=60 make
# fuzz` printed 95,626 executions in 61 s on 2026-11-26); under 100 a
# second the build or the machine is broken.
(( ${runs:-0} >= 100 * seconds )) || die "the fuzz target ran only ${runs:-0} inputs in ${seconds}s (fewer than 100 a second)"
