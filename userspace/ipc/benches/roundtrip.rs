//! Request/response round trip over a real abstract socket with schema
//! validation on (both directions), and pipelined throughput on one
//! connection with the rate limit lifted.
//!
//! Besides criterion's report, prints p50/p99 of 20,000 sequential round
//! trips and messages/s for 100,000 pipelined requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawos_ipc::server::{Connection, Handler, MethodError, ServerSettings, ServerStats};
use clawos_ipc::{
    AccessPolicy, ClientOptions, ComponentId, IpcClient, IpcServer, Object, Principal, ProtocolVersion, RateLimit,
    Request,
};
use criterion::{criterion_group, criterion_main, Criterion};

struct Echo;

impl Handler for Echo {
    async fn handle_request(&self, _connection: Connection, request: Request) -> Result<Object, MethodError> {
        Ok(request.params)
    }
}

fn setup(runtime: &tokio::runtime::Runtime) -> Arc<IpcClient> {
    let name = format!("clawos-ipc-bench-{}", std::process::id());
    runtime.block_on(async {
        let listener = tokio::net::UnixListener::from_std(clawos_ipc::socket::bind_abstract(&name).unwrap()).unwrap();
        let policy = "[identity]\nuids = { \"0\" = \"agent-loop\" }\n[[allow]]\nsenders = [\"*\"]\nrecipients = [\"*\"]\nmethods = [\"*\"]";
        let settings = ServerSettings {
            component: ComponentId::Scheduler,
            software_version: "bench".into(),
            protocol_versions: vec![ProtocolVersion::V1_0],
            policy: Arc::new(AccessPolicy::parse(policy, "bench").unwrap()),
            rate_limit: RateLimit::UNLIMITED,
            method_timeout: |_| clawos_ipc::timeouts::DEFAULT_REQUEST_TIMEOUT,
        };
        let server = IpcServer::new(settings, Arc::new(Echo), Arc::new(ServerStats::default()));
        tokio::spawn(async move { server.serve(listener).await });
        let stream = clawos_ipc::socket::connect_abstract(&name).unwrap();
        let options = ClientOptions::new(Principal::Component(ComponentId::AgentLoop));
        Arc::new(IpcClient::handshake(stream, ComponentId::Scheduler, options).await.unwrap().0)
    })
}

fn params() -> Object {
    let mut params = Object::new();
    params.insert("tool_name".into(), "bash".into());
    params.insert("arguments".into(), serde_json::json!(["ls", "-la"]));
    params
}

fn percentiles(runtime: &tokio::runtime::Runtime, client: &IpcClient) {
    let mut samples: Vec<Duration> = runtime.block_on(async {
        for _ in 0..2000 {
            client.call("echo", params(), None).await.unwrap();
        }
        let mut samples = Vec::with_capacity(20_000);
        for _ in 0..20_000 {
            let start = Instant::now();
            client.call("echo", params(), None).await.unwrap();
            samples.push(start.elapsed());
        }
        samples
    });
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!("round trip (validation on, 20000 calls): p50 {:?}  p99 {:?}", at(0.50), at(0.99));
}

fn throughput(runtime: &tokio::runtime::Runtime, client: &Arc<IpcClient>) {
    const TOTAL: usize = 100_000;
    const IN_FLIGHT: usize = 128;
    let elapsed = runtime.block_on(async {
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..IN_FLIGHT {
            let client = Arc::clone(client);
            tasks.spawn(async move {
                for _ in (worker..TOTAL).step_by(IN_FLIGHT) {
                    client.call("echo", params(), None).await.unwrap();
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        start.elapsed()
    });
    println!(
        "pipelined, rate limit lifted: {TOTAL} requests in {elapsed:?} = {:.0} requests/s ({:.0} messages/s counting responses)",
        TOTAL as f64 / elapsed.as_secs_f64(),
        2.0 * TOTAL as f64 / elapsed.as_secs_f64()
    );
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = setup(&runtime);
    percentiles(&runtime, &client);
    throughput(&runtime, &client);
    c.bench_function("request_response_roundtrip", |b| {
        b.iter(|| runtime.block_on(client.call("echo", params(), None)).unwrap())
    });
}

criterion_group!(roundtrip, benches);
criterion_main!(roundtrip);
