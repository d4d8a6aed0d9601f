//! The precompiled cache holds native code, and it lives on storage the
//! tool host does not vouch for, the daemon's on the data partition
//! (specs/toolhost/README.md, "Precompiled cache"). A file planted at a
//! tool's cache path must never run: the host recompiles the tool from its
//! verified wasm instead.

mod common;

use std::path::{Path, PathBuf};

use std::os::unix::fs::MetadataExt;

use clawos_toolhost::definition::ValidTool;
use clawos_toolhost::{CacheKey, CallRequest, HostConfig, ToolHost};
use common::{install, Fixture};
use serde_json::{json, Value};

fn call(host: &ToolHost, tool: &ValidTool, params: Value) -> Value {
    host.call(tool, &CallRequest { agent: "wasm-agent", params: &params, timeout: None }).unwrap()
}

/// The one artifact in `cache`.
fn only_artifact(cache: &Path) -> PathBuf {
    let artifacts: Vec<PathBuf> = std::fs::read_dir(cache).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    artifacts.into_iter().next().unwrap()
}

/// `<cache>/<sha256 of the tool's wasm>-<engine>.cwasm`, with the engine
/// part of `artifact`'s name (the same engine settings make the same one).
fn cache_path_of(cache: &Path, tool: &ValidTool, artifact: &Path) -> PathBuf {
    let name = artifact.file_name().unwrap().to_str().unwrap();
    let (_, engine) = name.split_once('-').unwrap();
    cache.join(format!("{}-{engine}", &tool.definition.wasm_hash["sha256:".len()..]))
}

fn cached_host(cache: &Path, clawfs_root: &Path, cache_key: Option<CacheKey>) -> ToolHost {
    let config = HostConfig {
        cache_dir: Some(cache.into()),
        cache_key,
        clawfs_root: clawfs_root.into(),
        ..HostConfig::default()
    };
    ToolHost::new(config).unwrap()
}

/// The echo tool installed in one directory and an impostor in another.
fn echo_and_impostor() -> (tempfile::TempDir, ValidTool, tempfile::TempDir, ValidTool) {
    let dir = tempfile::tempdir().unwrap();
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let other = tempfile::tempdir().unwrap();
    let fake = install(other.path(), &Fixture::Impostor, &[], 16, 5);
    (dir, echo, other, fake)
}

/// What an attacker with write access to the data partition does offline:
/// precompiles their own component with the same wasmtime and settings
/// (anyone can) and puts the artifact where the real tool's would be.
#[test]
fn a_planted_artifact_of_another_component_is_not_run() {
    let (dir, echo, attacker, fake) = echo_and_impostor();
    let attacker_cache = attacker.path().join("cache");
    let attacker_host = cached_host(&attacker_cache, attacker.path(), None);
    assert_eq!(call(&attacker_host, &fake, json!({"x": 1})), json!("planted"), "the impostor works on its own");
    let forged = only_artifact(&attacker_cache);

    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let planted = cache_path_of(&cache, &echo, &forged);
    std::fs::copy(&forged, &planted).unwrap();

    let key = CacheKey::random().unwrap();
    let host = cached_host(&cache, dir.path(), Some(key.clone()));
    assert_eq!(
        call(&host, &echo, json!({"x": 1})),
        json!({"x": 1}),
        "the planted artifact ran instead of the verified wasm"
    );
    // Recompiled and replaced by an entry of the daemon's own, which the
    // next host with the same key (a daemon restart) loads.
    assert_ne!(std::fs::read(&planted).unwrap(), std::fs::read(&forged).unwrap());
    let replaced = std::fs::metadata(&planted).unwrap().ino();
    assert_eq!(call(&cached_host(&cache, dir.path(), Some(key)), &echo, json!([2])), json!([2]));
    assert_eq!(std::fs::metadata(&planted).unwrap().ino(), replaced, "a valid entry is loaded, not rewritten");
}

/// An entry the daemon itself wrote, under its own key, for another tool:
/// the MAC covers the wasm's hash, so it does not verify under another
/// tool's name. (Without that, anyone able to install one tool could get
/// its code run as any other's.)
#[test]
fn an_authenticated_entry_moved_to_another_tools_name_is_refused() {
    let (dir, echo, _other, fake) = echo_and_impostor();
    let cache = dir.path().join("cache");
    let key = CacheKey::random().unwrap();

    let host = cached_host(&cache, dir.path(), Some(key.clone()));
    assert_eq!(call(&host, &fake, json!({})), json!("planted"));
    let entry = only_artifact(&cache);
    std::fs::rename(&entry, cache_path_of(&cache, &echo, &entry)).unwrap();

    let host = cached_host(&cache, dir.path(), Some(key));
    assert_eq!(call(&host, &echo, json!({"x": 1})), json!({"x": 1}));
}

/// The echo tool loaded once by a host with a fresh key: its directory,
/// the tool, the cache, the key and the cache entry it wrote.
fn echo_cached() -> (tempfile::TempDir, ValidTool, PathBuf, CacheKey, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let cache = dir.path().join("cache");
    let key = CacheKey::random().unwrap();
    cached_host(&cache, dir.path(), Some(key.clone())).load(&echo).unwrap();
    let entry = only_artifact(&cache);
    (dir, echo, cache, key, entry)
}

/// A daemon's own entries, read back by a host with another key (the next
/// boot's), are recompiled; with the same key they are loaded as they are.
#[test]
fn entries_are_reused_under_the_same_key_only() {
    let (dir, echo, cache, key, entry) = echo_cached();
    assert_eq!(std::fs::metadata(&entry).unwrap().mode() & 0o777, 0o600);
    let written = std::fs::metadata(&entry).unwrap().ino();

    assert_eq!(call(&cached_host(&cache, dir.path(), Some(key)), &echo, json!([1])), json!([1]));
    assert_eq!(std::fs::metadata(&entry).unwrap().ino(), written, "same key: loaded from the cache");

    assert_eq!(call(&cached_host(&cache, dir.path(), None), &echo, json!([1])), json!([1]));
    assert_ne!(std::fs::metadata(&entry).unwrap().ino(), written, "another key: recompiled and rewritten");
}

/// Whatever else sits at the path (garbage, a bare artifact without a MAC
/// as this host wrote before its entries had one, a truncated entry, a
/// FIFO that would block a plain open, a symlink) is recompiled over.
#[test]
fn anything_else_at_the_cache_path_is_recompiled_over() {
    let (dir, echo, cache, key, entry) = echo_cached();
    let good = std::fs::read(&entry).unwrap();

    for what in ["garbage", "no MAC", "truncated", "shorter than a MAC", "a FIFO", "a symlink"] {
        std::fs::remove_file(&entry).unwrap();
        match what {
            "garbage" => std::fs::write(&entry, b"\x7fELF not an artifact").unwrap(),
            "no MAC" => std::fs::write(&entry, &good[32..]).unwrap(),
            "truncated" => std::fs::write(&entry, &good[..good.len() / 2]).unwrap(),
            "shorter than a MAC" => std::fs::write(&entry, &good[..7]).unwrap(),
            "a FIFO" => {
                let name = std::ffi::CString::new(entry.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: `name` is a NUL-terminated path that outlives the call.
                assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
            }
            _ => std::os::unix::fs::symlink("/dev/zero", &entry).unwrap(),
        }
        let host = cached_host(&cache, dir.path(), Some(key.clone()));
        assert_eq!(call(&host, &echo, json!({"what": what})), json!({"what": what}), "{what}");
        let metadata = std::fs::symlink_metadata(&entry).unwrap();
        assert!(metadata.is_file(), "{what}: replaced by a regular file");
        assert_eq!(std::fs::read(&entry).unwrap().len(), good.len(), "{what}: replaced by a whole entry");
    }
}

/// A host with the image's artifacts and a cache, as wasm-daemon runs.
fn image_host(image: &Path, cache: &Path, clawfs_root: &Path) -> ToolHost {
    let config = HostConfig {
        image_artifacts: Some(image.into()),
        cache_dir: Some(cache.into()),
        clawfs_root: clawfs_root.into(),
        ..HostConfig::default()
    };
    ToolHost::new(config).unwrap()
}

/// The image's tools are compiled at build (`precompile_into`) and loaded
/// from there: nothing is compiled, so nothing is written to the cache.
#[test]
fn a_tool_with_an_image_artifact_is_not_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let image = dir.path().join("precompiled");
    std::fs::create_dir(&image).unwrap();
    let wasm = std::fs::read(&echo.wasm_path).unwrap();
    let artifact = ToolHost::new(HostConfig::default()).unwrap().precompile_into(&wasm, &image).unwrap();
    assert_eq!(std::fs::metadata(&artifact).unwrap().mode() & 0o777, 0o644);
    assert_eq!(cache_path_of(&image, &echo, &artifact), artifact, "named as a cache entry is");

    let cache = dir.path().join("cache");
    assert_eq!(call(&image_host(&image, &cache, dir.path()), &echo, json!({"x": 1})), json!({"x": 1}));
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0, "the tool was compiled, not loaded from the image");
}

/// An image artifact wasmtime refuses (here: garbage at its name) is
/// logged and the tool compiled from its verified wasm, through the cache.
#[test]
fn an_unusable_image_artifact_is_compiled_instead() {
    let (dir, echo, cache, _key, entry) = echo_cached();
    let image = dir.path().join("precompiled");
    std::fs::create_dir(&image).unwrap();
    std::fs::write(cache_path_of(&image, &echo, &entry), b"not an artifact").unwrap();
    std::fs::remove_file(&entry).unwrap();
    assert_eq!(call(&image_host(&image, &cache, dir.path()), &echo, json!([3])), json!([3]));
    only_artifact(&cache);
}
