//! Tool host timings: compiling a tool cold, loading it from the
//! precompiled cache (MAC verified) and, for an image tool when `out/tools`
//! is built, a cache entry under another key (recompiled), instantiating a cached tool in the pooling allocator,
//! a whole call (fresh instance + run) of a trivial tool with and without
//! its tool-call record, with the WAT fixtures the integration tests use; and
//! what epoch interruption (the per-call deadline) costs a CPU-bound loop,
//! against the same loop compiled without it, in the same run.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use clawos_toolhost::{CacheKey, CallRequest, HostConfig, ToolHost};
use common::{install, Fixture};
use criterion::{criterion_group, criterion_main, Criterion};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let cache = dir.path().join("cache");
    // One key for every host, as the daemon keeps one per boot: a restart
    // finds its entries valid.
    let key = CacheKey::random().unwrap();
    let config = |cache_dir| HostConfig {
        cache_dir,
        cache_key: Some(key.clone()),
        clawfs_root: dir.path().into(),
        ..HostConfig::default()
    };

    let mut group = c.benchmark_group("load");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    group.bench_function("cold compile", |b| b.iter(|| ToolHost::new(config(None)).unwrap().load(&echo).unwrap()));
    ToolHost::new(config(Some(cache.clone()))).unwrap().load(&echo).unwrap();
    group.bench_function("from precompiled cache", |b| {
        b.iter(|| ToolHost::new(config(Some(cache.clone()))).unwrap().load(&echo).unwrap())
    });
    group.finish();
    real_tool_load(c);

    let host = ToolHost::new(config(None)).unwrap();
    host.load(&echo).unwrap();
    c.bench_function("instantiate cached tool (pooling allocator)", |b| b.iter(|| host.instantiate(&echo).unwrap()));
    let params = serde_json::json!({"text": "hello"});
    let request = CallRequest { agent: "bench", params: &params, timeout: None };
    c.bench_function("call trivial tool (fresh instance)", |b| b.iter(|| host.call(&echo, &request).unwrap()));

    let records = std::sync::Mutex::new(agentfs::AgentFs::open(dir.path().join(clawfs::DATABASE_FILE)).unwrap());
    c.bench_function("call trivial tool + tool-call record", |b| {
        b.iter(|| host.call_recorded(&echo, &request, None, None, &records).unwrap())
    });
}

/// The same loads, and a miss under another key, for the largest of the image's tools in `out/tools`
/// (`make tools`): a Rust wasip2 component of about 130 KB, where
/// compiling, not building the engine, is what a cache miss costs. Skipped
/// without them, as tests/built_tools.rs is.
fn real_tool_load(c: &mut Criterion) {
    let registry = clawos_test_require::package_path("../../out/tools/registry.json");
    let Ok(registry) = clawos_toolhost::definition::Registry::load(&registry) else {
        eprintln!("SKIPPED load of an image tool: no {} (make tools)", registry.display());
        return;
    };
    let size =
        |tool: &&clawos_toolhost::definition::ValidTool| std::fs::metadata(&tool.wasm_path).map_or(0, |m| m.len());
    let tool = registry.tools().max_by_key(size).expect("the image has tools").clone();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let key = CacheKey::random().unwrap();
    let config = |cache_dir, cache_key| HostConfig {
        cache_dir,
        cache_key,
        clawfs_root: dir.path().into(),
        ..HostConfig::default()
    };
    let mut group = c.benchmark_group(format!("load {} ({} bytes of wasm)", tool.tool_id(), size(&&tool)));
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group
        .bench_function("cold compile", |b| b.iter(|| ToolHost::new(config(None, None)).unwrap().load(&tool).unwrap()));
    // A miss after a reboot: the entry is under the last boot's key, so it
    // is read, refused, recompiled and rewritten.
    group.bench_function("cache entry under another key", |b| {
        b.iter(|| {
            ToolHost::new(config(Some(cache.clone()), Some(CacheKey::random().unwrap()))).unwrap().load(&tool).unwrap()
        })
    });
    ToolHost::new(config(Some(cache.clone()), Some(key.clone()))).unwrap().load(&tool).unwrap();
    group.bench_function("from precompiled cache", |b| {
        b.iter(|| ToolHost::new(config(Some(cache.clone()), Some(key.clone()))).unwrap().load(&tool).unwrap())
    });
    group.finish();
}

/// A core-wasm loop of `n` iterations of integer work: the kind of code the
/// epoch checks are inserted into (one per loop back-edge and function entry).
const BURN_WAT: &str = r#"(module (func (export "burn") (param $n i32) (result i32) (local $acc i32)
  (loop $next
    (local.set $acc (i32.add (i32.mul (local.get $acc) (i32.const 31)) (local.get $n)))
    (local.set $n (i32.sub (local.get $n) (i32.const 1)))
    (br_if $next (local.get $n)))
  (local.get $acc)))"#;

fn epoch_overhead(c: &mut Criterion) {
    let wasm = wat::parse_str(BURN_WAT).unwrap();
    let mut group = c.benchmark_group("cpu-bound loop, 20M iterations");
    group.sample_size(20);
    for epoch in [false, true] {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(epoch);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let module = wasmtime::Module::new(&engine, &wasm).unwrap();
        let name = if epoch { "with epoch deadline" } else { "without deadline" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut store = wasmtime::Store::new(&engine, ());
                if epoch {
                    store.set_epoch_deadline(u64::MAX / 2);
                }
                let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
                let burn = instance.get_typed_func::<i32, i32>(&mut store, "burn").unwrap();
                burn.call(&mut store, 20_000_000).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, epoch_overhead);
criterion_main!(benches);
