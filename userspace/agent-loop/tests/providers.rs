//! The providers against scripted OpenAI- and Anthropic-compatible servers
//! on loopback (tests/scripted-provider): real HTTP, real SSE, the faults
//! remote APIs have (specs/agent/providers.md).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawos_agent_loop::provider::config::{self, ProviderConfig};
use clawos_agent_loop::provider::reliable::{Reliable, RetryPolicy};
use clawos_agent_loop::provider::{
    ChatMessage, ChatRequest, FinishReason, KeySource, ProviderError, Role, SharedProvider, ToolSpec, Usage,
};
use clawos_scripted_provider::{anthropic, openai, Reply, Script, Server};
use futures::future::BoxFuture;
use futures::FutureExt as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

const CANARY_KEY: &str = "sk-canary-7d1e0c55b0e34f4c";

/// The vault, as far as a provider sees it: one secret.
struct OneKey;

impl KeySource for OneKey {
    fn key(&self, secret_id: &str) -> BoxFuture<'_, Result<Zeroizing<String>, String>> {
        let answer = if secret_id == "provider-test" {
            Ok(Zeroizing::new(CANARY_KEY.to_owned()))
        } else {
            Err(format!("no secret `{secret_id}`"))
        };
        async move { answer }.boxed()
    }
}

fn provider(server: &Server, kind: &str, extra: &str) -> SharedProvider {
    let table: ProviderConfig = toml::from_str(&format!(
        "kind = \"{kind}\"\nbase_url = \"{}\"\napi_key_secret = \"provider-test\"\n{extra}",
        server.api_url()
    ))
    .unwrap();
    config::build("scripted", &table, Arc::new(OneKey)).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::text(Role::System, "be brief"), ChatMessage::text(Role::User, "hi")],
        tools: vec![ToolSpec {
            name: "text-stats".into(),
            description: "counts".into(),
            parameters: json!({"type": "object"}),
        }],
        max_tokens: 64,
        temperature: None,
    }
}

/// Streams `provider`'s answer, collecting what was shown.
async fn ask(provider: &SharedProvider) -> (Result<clawos_agent_loop::provider::ChatResponse, ProviderError>, String) {
    let shown = Mutex::new(String::new());
    let sink = |text: &str| shown.lock().unwrap().push_str(text);
    let answer = provider.chat_stream(&request(), &sink, &CancellationToken::new()).await;
    (answer, shown.into_inner().unwrap())
}

fn policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, base: Duration::from_millis(10), max: Duration::from_millis(50) }
}

#[tokio::test]
async fn openai_text_streams_as_it_arrives_with_the_providers_usage() {
    let server = Server::start(Script::new().reply(openai::text(["Hel", "lo", "!"], Some((21, 3))))).await.unwrap();
    let (answer, shown) = ask(&provider(&server, "openai", "")).await;
    let answer = answer.unwrap();
    assert_eq!((answer.text.as_str(), shown.as_str()), ("Hello!", "Hello!"));
    assert_eq!(answer.usage, Usage { input_tokens: 21, output_tokens: 3, estimated: false });
    assert_eq!(answer.finish, FinishReason::Stop);
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {CANARY_KEY}").as_str()));
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["tools"][0]["function"]["name"], "text-stats");
}

#[tokio::test]
async fn openai_tool_calls_split_across_deltas_are_assembled_by_index() {
    let script = Script::new()
        .reply(openai::tool_call("call_1", "text-stats", r#"{"text": "one two three"}"#, 5))
        .reply(openai::parallel_tool_calls(
            &[("a", "file_read", r#"{"path": "x.md"}"#), ("b", "text-stats", r#"{"text": "y"}"#)],
            3,
        ));
    let server = Server::start(script).await.unwrap();
    let provider = provider(&server, "openai", "");
    let (answer, _) = ask(&provider).await;
    let answer = answer.unwrap();
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(
        (answer.tool_calls[0].id.as_str(), answer.tool_calls[0].arguments.clone()),
        ("call_1", json!({"text": "one two three"}))
    );
    assert!(answer.usage.estimated, "no usage block: estimated");
    let (answer, _) = ask(&provider).await;
    let calls: Vec<_> = answer.unwrap().tool_calls.into_iter().map(|c| (c.id, c.name, c.arguments)).collect();
    assert_eq!(
        calls,
        [
            ("a".into(), "file_read".into(), json!({"path": "x.md"})),
            ("b".into(), "text-stats".into(), json!({"text": "y"}))
        ]
    );
}

#[tokio::test]
async fn anthropic_text_and_tool_use_are_native() {
    let script = Script::new().reply(anthropic::text(["Hi ", "there"], Some((30, 4)))).reply(anthropic::tool_use(
        "toolu_1",
        "text-stats",
        r#"{"text": "a b"}"#,
        4,
    ));
    let server = Server::start(script).await.unwrap();
    let provider = provider(&server, "anthropic", "");
    let (answer, shown) = ask(&provider).await;
    let answer = answer.unwrap();
    assert_eq!((answer.text.as_str(), shown.as_str()), ("Hi there", "Hi there"));
    assert_eq!(answer.usage, Usage { input_tokens: 30, output_tokens: 4, estimated: false });
    let (answer, _) = ask(&provider).await;
    let answer = answer.unwrap();
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!(
        (answer.tool_calls[0].name.as_str(), answer.tool_calls[0].arguments.clone()),
        ("text-stats", json!({"text": "a b"}))
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.header("x-api-key"), Some(CANARY_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.body["system"], "be brief");
    assert_eq!(sent.body["tools"][0]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let script = Script::new()
        .reply(openai::error(429, "rate_limit_exceeded", "slow down").retry_after(1))
        .reply(openai::text(["ok"], None));
    let server = Server::start(script).await.unwrap();
    let reliable = Reliable::new(vec![(provider(&server, "openai", ""), "m".into())], policy(2));
    let started = Instant::now();
    let (answer, index) = reliable.chat_stream_indexed(&request(), &|_| {}, &CancellationToken::new()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After honoured: {:?}", started.elapsed());
    assert_eq!((answer.text.as_str(), index, server.served()), ("ok", 0, 2));
}

#[tokio::test]
async fn a_route_whose_retries_are_spent_falls_back_to_the_next() {
    let failing = Server::start(Script::new().reply(Reply::server_error()).reply(Reply::server_error())).await.unwrap();
    let fallback = Server::start(Script::new().reply(anthropic::text(["from the fallback"], None))).await.unwrap();
    let chain = vec![
        (provider(&failing, "openai", ""), "m1".to_owned()),
        (provider(&fallback, "anthropic", ""), "m2".to_owned()),
    ];
    let (answer, index) = Reliable::new(chain, policy(1))
        .chat_stream_indexed(&request(), &|_| {}, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((answer.text.as_str(), index, failing.served()), ("from the fallback", 1, 2));
    assert_eq!(fallback.requests()[0].body["model"], "m2", "each route asks its own model");
}

#[tokio::test]
async fn malformed_json_is_an_error_that_is_not_retried() {
    let server =
        Server::start(Script::new().reply(openai::malformed()).reply(openai::text(["never"], None))).await.unwrap();
    let reliable = Reliable::new(vec![(provider(&server, "openai", ""), "m".into())], policy(3));
    let error = reliable.chat_stream_indexed(&request(), &|_| {}, &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Malformed { .. }), "{error}");
    assert_eq!(server.served(), 1);
}

#[tokio::test]
async fn a_stream_cut_before_its_end_is_interrupted_and_not_retried_once_text_was_shown() {
    // Cut after the first text chunk (after the role's): shown, so no
    // second answer.
    let server = Server::start(
        Script::new().reply(openai::text(["par", "tial"], None).cut_after(2)).reply(openai::text(["again"], None)),
    )
    .await
    .unwrap();
    let reliable = Reliable::new(vec![(provider(&server, "openai", ""), "m".into())], policy(3));
    let shown = Mutex::new(String::new());
    let sink = |text: &str| shown.lock().unwrap().push_str(text);
    let error = reliable.chat_stream_indexed(&request(), &sink, &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Interrupted { .. }), "{error}");
    assert_eq!((shown.into_inner().unwrap().as_str(), server.served()), ("par", 1));

    // Cut before any text: nothing shown, so it is tried again.
    let server =
        Server::start(Script::new().reply(openai::text(["x"], None).cut_after(0)).reply(openai::text(["whole"], None)))
            .await
            .unwrap();
    let reliable = Reliable::new(vec![(provider(&server, "openai", ""), "m".into())], policy(3));
    let (answer, _) = reliable.chat_stream_indexed(&request(), &|_| {}, &CancellationToken::new()).await.unwrap();
    assert_eq!((answer.text.as_str(), server.served()), ("whole", 2));

    // Anthropic: complete only on message_stop.
    let server = Server::start(Script::new().reply(anthropic::text(["a", "b"], None).cut_after(3))).await.unwrap();
    let (answer, _) = ask(&provider(&server, "anthropic", "")).await;
    assert!(matches!(answer, Err(ProviderError::Interrupted { .. })), "{answer:?}");
}

#[tokio::test]
async fn a_slow_stream_hits_the_idle_timeout_and_cancellation_stops_it() {
    let server =
        Server::start(Script::new().reply(openai::text(["a", "b", "c"], None).event_delay_ms(800))).await.unwrap();
    let (answer, _) = ask(&provider(&server, "openai", "idle_timeout_ms = 200")).await;
    assert!(matches!(answer, Err(ProviderError::Idle { idle_ms: 200, .. })), "{answer:?}");

    // Comments while the model thinks are data on the wire: not idle.
    let mut thinking = openai::text(["kept ", "alive"], None).event_delay_ms(150);
    thinking.events.splice(0..0, std::iter::repeat_n(clawos_scripted_provider::Event::raw(": keep-alive\n\n"), 6));
    let server = Server::start(Script::new().reply(thinking)).await.unwrap();
    let (answer, _) = ask(&provider(&server, "openai", "idle_timeout_ms = 400")).await;
    assert_eq!(answer.map(|answer| answer.text), Ok("kept alive".to_owned()));

    let server =
        Server::start(Script::new().reply(openai::text(["a", "b", "c"], None).event_delay_ms(5_000))).await.unwrap();
    let provider = provider(&server, "openai", "");
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let answer = provider.chat_stream(&request(), &|_| {}, &cancel).await;
    assert_eq!(answer, Err(ProviderError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[tokio::test]
async fn the_key_never_appears_in_an_error_even_when_the_provider_echoes_it() {
    let echo = format!("Incorrect API key provided: {CANARY_KEY}. You can find your API key at ...");
    let script = Script::new()
        .reply(openai::error(401, "invalid_api_key", &echo))
        .reply(Reply::sse([anthropic::error_event("overloaded_error", &echo)]))
        .reply(openai::text(["x"], None));
    let server = Server::start(script).await.unwrap();
    for kind in ["openai", "anthropic"] {
        let (answer, _) = ask(&provider(&server, kind, "")).await;
        let error = answer.unwrap_err().to_string();
        assert!(!error.contains(CANARY_KEY) && error.contains("[redacted]"), "{error}");
    }
    // A secret the vault does not have is the key's error, before any request.
    let table: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"{}\"\napi_key_secret = \"provider-missing\"\n",
        server.api_url()
    ))
    .unwrap();
    let (answer, _) = ask(&config::build("scripted", &table, Arc::new(OneKey)).unwrap()).await;
    assert!(matches!(answer, Err(ProviderError::Key { .. })), "{answer:?}");
    assert_eq!(server.served(), 2);
}

#[tokio::test]
async fn an_unreachable_provider_is_a_connect_error_naming_only_its_endpoint() {
    let table: ProviderConfig =
        toml::from_str("kind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1?token=abc\"\nconnect_timeout_ms = 500\n")
            .unwrap();
    let (answer, _) = ask(&config::build("down", &table, Arc::new(OneKey)).unwrap()).await;
    let error = answer.unwrap_err();
    assert!(matches!(error, ProviderError::Connect { .. }) && error.is_transient(), "{error}");
    assert!(error.to_string().contains("http://127.0.0.1:9") && !error.to_string().contains("token=abc"), "{error}");
}

#[tokio::test]
async fn a_server_on_a_unix_socket_is_reached_through_it() {
    // The in-box model's server listens on a Unix socket; the scripted
    // server's TCP port is bridged to one here.
    let server = Server::start(Script::new().reply(openai::text(["local"], None))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("api.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let target = server.addr();
    tokio::spawn(async move {
        while let Ok((mut unix, _)) = listener.accept().await {
            let mut tcp = tokio::net::TcpStream::connect(target).await.unwrap();
            tokio::spawn(async move { tokio::io::copy_bidirectional(&mut unix, &mut tcp).await });
        }
    });
    let table: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"http://localhost/v1\"\nunix_socket = \"{}\"\n",
        socket.display()
    ))
    .unwrap();
    let (answer, _) = ask(&config::build("local", &table, Arc::new(OneKey)).unwrap()).await;
    assert_eq!(answer.unwrap().text, "local");
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
}

#[tokio::test]
async fn a_redirect_is_never_followed_the_key_and_the_conversation_stay_put() {
    // Where a redirect points: a bare listener that counts connections, so
    // not even a connection without a request goes unseen.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = elsewhere.local_addr().unwrap();
    let target = format!("http://{addr}/v1/chat/completions");
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while elsewhere.accept().await.is_ok() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut script = Script::new();
    for status in [301, 302, 307, 308] {
        for _kind in ["openai", "anthropic"] {
            script = script.reply(Reply::status(status).header("location", &target));
        }
    }
    let server = Server::start(script).await.unwrap();
    for status in [301, 302, 307, 308] {
        for kind in ["openai", "anthropic"] {
            // Retries allowed, so a redirect taken for a transient error
            // would show as a second request.
            let reliable = Reliable::new(vec![(provider(&server, kind, ""), "m".into())], policy(2));
            let error = reliable.chat_stream_indexed(&request(), &|_| {}, &CancellationToken::new()).await.unwrap_err();
            let text = error.to_string();
            assert!(matches!(error, ProviderError::Status { status: s, .. } if s == status), "{kind} {status}: {text}");
            assert!(text.contains(&format!("redirected to http://{addr};")), "{text}");
            assert!(!text.contains(CANARY_KEY) && !text.contains("/v1/chat"), "{text}");
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.served(), 8, "each redirect answered once, never retried");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing reached where the redirects pointed");
}

/// `proxy`: every request goes through the named HTTP proxy (the scripted
/// server as one: it records the origin an absolute-form request names);
/// the origin itself (`provider.invalid`) would not resolve.
#[tokio::test]
async fn a_provider_with_a_proxy_reaches_its_origin_only_through_it() {
    let server = Server::start(Script::new().reply(openai::text(["via proxy"], Some((5, 2))))).await.unwrap();
    let port = server.api_url().rsplit(':').next().unwrap().split('/').next().unwrap().to_owned();
    let table: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"http://provider.invalid:{port}/v1\"\nproxy = \"http://127.0.0.1:{port}\"\napi_key_secret = \"provider-test\"\n"
    ))
    .unwrap();
    let provider = config::build("scripted", &table, Arc::new(OneKey)).unwrap();
    let (answer, _) = ask(&provider).await;
    assert_eq!(answer.unwrap().text, "via proxy");
    let sent = &server.requests()[0];
    assert_eq!(sent.proxied_to.as_deref(), Some(format!("provider.invalid:{port}").as_str()));
    assert_eq!(sent.path, "/v1/chat/completions");

    // Without the proxy the same origin is not reached at all.
    let direct: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"http://provider.invalid:{port}/v1\"\nconnect_timeout_ms = 2000\n"
    ))
    .unwrap();
    let (answer, _) = ask(&config::build("scripted", &direct, Arc::new(OneKey)).unwrap()).await;
    assert!(answer.is_err());
    assert_eq!(server.requests().len(), 1);
}
