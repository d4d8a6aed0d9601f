//! Tool host timings: compiling a tool cold, loading it from the
//! precompiled cache, and a whole call (fresh instance + run) of a trivial
//! tool, with the WAT fixtures the integration tests use.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use clawos_toolhost::{CallRequest, HostConfig, ToolHost};
use common::{install, Fixture};
use criterion::{criterion_group, criterion_main, Criterion};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let echo = install(dir.path(), &Fixture::Echo, &[], 16, 5);
    let cache = dir.path().join("cache");
    let config = |cache_dir| HostConfig { cache_dir, clawfs_root: dir.path().into(), ..HostConfig::default() };

    let mut group = c.benchmark_group("load");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    group.bench_function("cold compile", |b| b.iter(|| ToolHost::new(config(None)).unwrap().load(&echo).unwrap()));
    ToolHost::new(config(Some(cache.clone()))).unwrap().load(&echo).unwrap();
    group.bench_function("from precompiled cache", |b| b.iter(|| ToolHost::new(config(Some(cache.clone()))).unwrap().load(&echo).unwrap()));
    group.finish();

    let host = ToolHost::new(config(None)).unwrap();
    host.load(&echo).unwrap();
    let params = serde_json::json!({"text": "hello"});
    let request = CallRequest { agent_id: "bench", params: &params, timeout: None };
    c.bench_function("call trivial tool (fresh instance)", |b| b.iter(|| host.call(&echo, &request).unwrap()));

    let mut audit = agentfs::AgentFs::open(dir.path().join("workspace.db")).unwrap();
    c.bench_function("call trivial tool + audit insert", |b| b.iter(|| host.call_recorded(&echo, &request, None, &mut audit).unwrap()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
