#!/usr/bin/env python3
"""source-mtimes.py: lets a fresh clone reuse the cache's cargo builds.

Cargo decides that a crate of the workspace must be rebuilt when one of its
source files is newer than the build's record of it; a clone gives every file
the time of the clone, so on its own a clean clone (CI) rebuilds the whole
workspace in every target directory though nothing changed (`make test-unit`
alone took 8 min 25 s in a fresh clone on two cores, 6 min 7 s of it cargo
compiling the workspace; 3 min 24 s with this, its own changes included). Run before every build (the Makefile's `deps`), this
keeps a manifest in the cache, one line per file git tracks: its SHA-256 and
the modification time it was given when that content first reached a build.
A file whose content is the manifest's gets that time back; any other file is
touched now and enters the manifest with this content and this time.

Why no stale build can be reused: a file's time in the manifest is the moment
its content last changed as far as any build under the cache could see, and
every build since then (each one runs this first) read that same content.
So a build record older than that time is rebuilt (cargo's own rule), and
one younger than it was made from this content. The rule holds as long as
every build into the cache's target directories goes through `make`:
CARGO_TARGET_DIR pointing elsewhere makes this script change nothing, and a
cargo run by hand into the cache's directories must `make deps` first.
A reused binary keeps the paths it was compiled with, so no code may fix the
checkout's path at compile time (`make lint` refuses env!("CARGO_MANIFEST_DIR")).
"""

import fcntl
import hashlib
import os
import subprocess
import sys
import time


def main() -> int:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cache = os.environ.get("CLAWOS_CACHE", "/var/cache/clawos")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(cache, "cargo-target"))
    if not os.path.abspath(target).startswith(os.path.abspath(cache) + os.sep):
        print(f"source-mtimes: CARGO_TARGET_DIR {target} is outside {cache}: mtimes left as they are")
        return 0
    os.makedirs(cache, exist_ok=True)
    manifest = os.path.join(cache, "source-mtimes.tsv")
    files = subprocess.run(
        ["git", "-C", repo, "ls-files", "-z"], check=True, capture_output=True
    ).stdout.decode().split("\0")
    # One run at a time: two that interleave could each record the other's content.
    with open(manifest + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = {}
        try:
            with open(manifest) as f:
                for line in f:
                    digest, mtime_ns, path = line.rstrip("\n").split("\t", 2)
                    known[path] = (digest, int(mtime_ns))
        except FileNotFoundError:
            pass
        now = time.time_ns()
        restored = touched = 0
        lines = []
        for path in filter(None, files):
            full = os.path.join(repo, path)
            if os.path.islink(full) or not os.path.isfile(full):
                continue  # a symlink's target is a tracked file of its own; a deleted file has none
            with open(full, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            was = known.get(path)
            if was and was[0] == digest:
                mtime_ns = was[1]
                restored += 1
            else:
                mtime_ns = now
                touched += 1
            os.utime(full, ns=(mtime_ns, mtime_ns))
            lines.append(f"{digest}\t{mtime_ns}\t{path}\n")
        tmp = manifest + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, manifest)
    print(f"source-mtimes: {restored} files as the cache's builds saw them, {touched} new or changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
