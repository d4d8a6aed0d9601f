//! The server end to end with the real model: a temporary socket, real
//! HTTP, real generation. The model comes from `CLAWOS_SMOLLM2_DIR`
//! (`make test-unit` sets it to out/models/smollm2-135m-instruct, which
//! `make models` fills); without it these tests fail, they do not skip.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use model_server::api::MODEL_ID;
use model_server::engine::{Message, Model, DEFAULT_SYSTEM_PROMPT, PREFILL_CHUNK};
use model_server::server::Server;
use serde_json::{json, Value};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

/// Token ids of `<|endoftext|>`, `<|im_start|>`, `<|im_end|>` in SmolLM2's
/// vocabulary: banned with `logit_bias` where a test needs the answer to
/// run to `max_tokens`.
const NO_STOP: &str = r#"{"0": -100, "1": -100, "2": -100}"#;

fn model_dir() -> PathBuf {
    match std::env::var_os("CLAWOS_SMOLLM2_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "CLAWOS_SMOLLM2_DIR is not set: these tests need SmolLM2-135M-Instruct \
             (`make models`, then CLAWOS_SMOLLM2_DIR=$PWD/out/models/smollm2-135m-instruct, as `make test-unit` does)"
        ),
    }
}

/// A server on a socket of its own, in a thread of its own; stopped when dropped.
struct TestServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(model_dir: PathBuf) -> Self {
        Self::start_keeping(model_dir, None)
    }

    /// A server keeping the system turns' states it reads in `prefix_cache`.
    fn start_keeping(model_dir: PathBuf, prefix_cache: Option<PathBuf>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("api.sock");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::channel();
        let path = socket.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::UnixListener::bind(&path).unwrap();
                ready.send(()).unwrap();
                tokio::select! {
                    () = Server::with_options(model_dir, Default::default(), prefix_cache.map(|dir| (dir, 64 << 20))).serve(listener) => {}
                    _ = stopped => {}
                }
            });
        });
        is_ready.recv().unwrap();
        TestServer { _dir: dir, socket, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|stop| stop.send(()));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One request on a connection of its own; the connection's task is
/// answered too, so a test can cut the connection.
async fn request(socket: &Path, method: Method, path: &str, body: &str) -> (Response<Incoming>, JoinHandle<()>) {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = Request::builder()
        .method(method)
        .uri(format!("http://localhost{path}"))
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    (sender.send_request(request).await.unwrap(), connection)
}

async fn json_of(response: Response<Incoming>) -> Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)))
}

async fn call(socket: &Path, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
    let (response, _) = request(socket, method, path, body).await;
    (response.status(), json_of(response).await)
}

fn chat_body(text: &str, extra: Value) -> String {
    let mut body = json!({"model": MODEL_ID, "messages": [{"role": "user", "content": text}], "temperature": 0});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body.to_string()
}

/// Reads server-sent events until `limit` of them came or the stream ended.
async fn events(body: &mut Incoming, limit: usize) -> Vec<String> {
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < limit {
        let Some(frame) = body.frame().await else { break };
        if let Ok(data) = frame.unwrap().into_data() {
            buffer.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if event.starts_with(':') {
                continue; // a comment: progress through a long prompt
            }
            let data =
                event.trim_end().strip_prefix("data: ").unwrap_or_else(|| panic!("not an SSE data line: {event:?}"));
            events.push(data.to_owned());
        }
    }
    events
}

async fn health(socket: &Path) -> Value {
    let (status, health) = call(socket, Method::GET, "/health", "").await;
    assert_eq!(status, StatusCode::OK);
    health
}

#[tokio::test]
async fn a_chat_gets_an_answer_and_the_model_loads_at_the_first_request() {
    let server = TestServer::start(model_dir());
    let health = health(&server.socket).await;
    assert_eq!(health["model_state"], "unloaded", "{health}");
    let (status, models) = call(&server.socket, Method::GET, "/v1/models", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(models["data"][0]["id"], MODEL_ID);

    let (status, answer) = call(
        &server.socket,
        Method::POST,
        "/v1/chat/completions",
        &chat_body("What is the capital of France?", json!({"max_tokens": 48})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    eprintln!("answer: {answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], MODEL_ID);
    let choice = &answer["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().unwrap();
    assert!(!text.trim().is_empty(), "{answer}");
    assert!(text.contains("Paris"), "a 135M model still knows this one: {text:?}");
    assert!(matches!(choice["finish_reason"].as_str(), Some("stop" | "length")), "{answer}");
    let usage = &answer["usage"];
    let (prompt, completion) = (usage["prompt_tokens"].as_u64().unwrap(), usage["completion_tokens"].as_u64().unwrap());
    assert!(prompt > 10 && completion > 0 && completion <= 48, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), prompt + completion);
    assert_eq!(health_of(&server).await["model_state"], "loaded");
}

async fn health_of(server: &TestServer) -> Value {
    health(&server.socket).await
}

#[tokio::test]
async fn a_stream_comes_in_chunks_and_ends_with_usage_and_done() {
    let server = TestServer::start(model_dir());
    let body = chat_body(
        "Tell me about the sea.",
        json!({"stream": true, "max_tokens": 12, "logit_bias": serde_json::from_str::<Value>(NO_STOP).unwrap()}),
    );
    let (response, _) = request(&server.socket, Method::POST, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let events = events(&mut body, usize::MAX).await;
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert!(chunks.len() >= 4, "a role chunk, text chunks and a last chunk: {events:?}");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(!text.trim().is_empty(), "{events:?}");
    let pieces =
        chunks.iter().filter(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty())).count();
    assert!(pieces >= 2, "the text came in one piece: {events:?}");
    for chunk in &chunks[..chunks.len() - 1] {
        assert!(chunk["choices"][0]["finish_reason"].is_null(), "{chunk}");
        assert_eq!(chunk["object"], "chat.completion.chunk");
    }
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length", "{last}");
    assert_eq!(last["usage"]["completion_tokens"], 12, "{last}");
    let usage = &last["usage"];
    assert_eq!(usage["total_tokens"].as_u64(), Some(usage["prompt_tokens"].as_u64().unwrap() + 12));
}

#[tokio::test]
async fn a_long_prompt_reports_its_progress_in_the_stream() {
    let server = TestServer::start(model_dir());
    let long = "The agent read the notes in its workspace and wrote a summary. ".repeat(50);
    let body = chat_body(&long, json!({"stream": true, "max_tokens": 1}));
    let (response, _) = request(&server.socket, Method::POST, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let raw = response.into_body().collect().await.unwrap().to_bytes();
    let raw = String::from_utf8(raw.to_vec()).unwrap();
    let comments: Vec<&str> = raw.split("\n\n").filter(|event| event.starts_with(':')).collect();
    assert!(comments.len() >= 2, "{raw}");
    assert!(comments[0].starts_with(&format!(": prompt {PREFILL_CHUNK}/")), "{raw}");
    assert!(raw.ends_with("data: [DONE]\n\n"), "{raw}");
}

#[tokio::test]
async fn max_tokens_ends_the_answer_with_length() {
    let server = TestServer::start(model_dir());
    let body = chat_body(
        "Write a long story about a dragon.",
        json!({"max_tokens": 7, "logit_bias": serde_json::from_str::<Value>(NO_STOP).unwrap()}),
    );
    let (status, answer) = call(&server.socket, Method::POST, "/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], 7, "{answer}");
    // Asking for more than the cap is served, up to the cap.
    let (status, answer) = call(
        &server.socket,
        Method::POST,
        "/v1/chat/completions",
        &chat_body("Hi", json!({"max_tokens": 100000, "stop": "."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop", "{answer}");
    assert!(
        !answer["choices"][0]["message"]["content"].as_str().unwrap().contains('.'),
        "the stop string is not in the answer: {answer}"
    );
}

#[tokio::test]
async fn bad_requests_get_openai_errors() {
    let server = TestServer::start(model_dir());
    let socket = &server.socket;
    let (status, error) = call(socket, Method::POST, "/v1/chat/completions", "{\"model\": ").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("not a valid chat completion request"), "{error}");
    let (status, error) = call(
        socket,
        Method::POST,
        "/v1/chat/completions",
        &chat_body("hi", json!({"response_format": {"type": "json_object"}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("response_format"),
        "the unknown field is named: {error}"
    );
    let (status, error) =
        call(socket, Method::POST, "/v1/chat/completions", &chat_body("hi", json!({"model": "gpt-4o"}))).await;
    assert_eq!((status, error["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("model_not_found")), "{error}");
    let (status, error) = call(socket, Method::GET, "/v1/chat/completions", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{error}");
    let (status, error) = call(socket, Method::GET, "/v1/completions", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    // Checked once the model is there: a bias on a token it does not have.
    let (status, error) =
        call(socket, Method::POST, "/v1/chat/completions", &chat_body("hi", json!({"logit_bias": {"999999": 1}})))
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "logit_bias", "{error}");
    // None of it made an answer.
    assert_eq!(health(socket).await["answers"], 0);
}

#[tokio::test]
async fn a_missing_model_is_503_and_the_server_stays_up() {
    let empty = tempfile::tempdir().unwrap();
    let server = TestServer::start(empty.path().to_owned());
    let (status, error) = call(&server.socket, Method::POST, "/v1/chat/completions", &chat_body("hi", json!({}))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{error}");
    assert_eq!(error["error"]["code"], "model_unavailable", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("no .gguf file"), "{error}");
    let health = health(&server.socket).await;
    assert_eq!(health["model_state"], "failed", "{health}");
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_answer() {
    let server = TestServer::start(model_dir());
    // As long an answer as the server gives, which cannot end early.
    let body = chat_body(
        "Count from one to one thousand.",
        json!({"stream": true, "max_tokens": 1024, "temperature": 0.8, "logit_bias": serde_json::from_str::<Value>(NO_STOP).unwrap()}),
    );
    let (response, connection) = request(&server.socket, Method::POST, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = events(&mut body, 4).await;
    assert_eq!(first.len(), 4, "{first:?}");
    assert_eq!(health(&server.socket).await["busy"], true);
    // Gone: the connection is closed under the stream.
    connection.abort();
    drop(body);
    let gone = Instant::now();
    let health = loop {
        let health = health(&server.socket).await;
        if health["busy"] == false {
            break health;
        }
        assert!(gone.elapsed() < Duration::from_secs(10), "still generating 10 s after the client left: {health}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("idle {:?} after the client left: {health}", gone.elapsed());
    assert_eq!(health["cancelled"], 1, "{health}");
    let generated = health["completion_tokens"].as_u64().unwrap();
    assert!(generated < 100, "the answer went on after its client left: {generated} tokens of 1024");
    // The next request is served at once.
    let asked = Instant::now();
    let (status, answer) =
        call(&server.socket, Method::POST, "/v1/chat/completions", &chat_body("Hello", json!({"max_tokens": 4}))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(asked.elapsed() < Duration::from_secs(10), "the next answer took {:?}", asked.elapsed());
}

/// The loop guard (specs/agent/local-model.md): asked who it is under the
/// default agent's prompt, SmolLM2 answers greedily "Hello, I'm a human,
/// I'm a human. I'm a human. ..." until `max_tokens`; the answer ends at the
/// first span said twice in a row, by itself (`stop`).
#[tokio::test]
async fn an_answer_that_repeats_itself_ends_at_the_repeat() {
    let server = TestServer::start(model_dir());
    let system =
        "You are default, an AI agent on a ClawOS box, talking with its operator. Answer briefly and truthfully.\n\n\
                  # Soul\n\nI am honest about what I know and what I did. I act only through my tools and within the \
                  limits I was given. I never reveal secrets or try to change these rules.\n\n\
                  # Identity\n\nI am default, an AI agent on a ClawOS box.\n\n# User";
    let messages = json!([{"role": "system", "content": system}, {"role": "user", "content": "hello, who are you?"}]);
    let body = chat_body("", json!({"messages": messages, "max_tokens": 120}));
    let (status, answer) = call(&server.socket, Method::POST, "/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(answer["choices"][0]["finish_reason"], "stop", "{answer}");
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() < 40, "{answer}");
    assert!(text.matches("I'm a human").count() <= 3, "the loop went on: {text}");
}

#[tokio::test]
async fn a_conversation_that_goes_on_reuses_the_state_of_its_last_answer() {
    let server = TestServer::start(model_dir());
    let socket = &server.socket;
    let ask = |messages: &Value| chat_body("", json!({"messages": messages, "max_tokens": 12}));
    let first = json!([{"role": "user", "content": "Name a fruit."}]);
    let (status, answer) = call(socket, Method::POST, "/v1/chat/completions", &ask(&first)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{answer}");
    let said = answer["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
    let follow_up = json!([
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "And a vegetable?"},
    ]);
    let (status, continued) = call(socket, Method::POST, "/v1/chat/completions", &ask(&follow_up)).await;
    assert_eq!(status, StatusCode::OK, "{continued}");
    let cached = continued["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let first_prompt = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(cached > first_prompt, "the first prompt and the answer were reused: {continued}");
    // Another conversation in between: the follow-up is computed again
    // after the system turn (the template's own, whose state is kept), and
    // answered the same (greedy).
    let (status, other) =
        call(socket, Method::POST, "/v1/chat/completions", &ask(&json!([{"role": "user", "content": "Hello"}]))).await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let system = other["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    assert!(system > 0 && system < first_prompt, "only the system turn was reused: {other}");
    let (status, whole) = call(socket, Method::POST, "/v1/chat/completions", &ask(&follow_up)).await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert_eq!(whole["usage"]["prompt_tokens_details"]["cached_tokens"], system, "{whole}");
    assert_eq!(
        whole["choices"][0]["message"]["content"], continued["choices"][0]["message"]["content"],
        "{whole} {continued}"
    );
}

/// A new conversation under a system prompt the server has read (an
/// agent's next session, a scheduled turn) reads only what follows it, and
/// is answered as if it had been read whole.
#[tokio::test]
async fn a_new_conversation_reuses_the_state_of_its_system_turn() {
    let system = "You are a terse assistant on a small box. Answer in one short sentence.";
    let ask = |question: &str| {
        chat_body(
            "",
            json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}], "max_tokens": 12}),
        )
    };
    let usage = |answer: &Value, key: &str| answer["usage"][key].as_u64().unwrap_or_else(|| panic!("{answer}"));
    let fresh = TestServer::start(model_dir());
    let (status, alone) = call(&fresh.socket, Method::POST, "/v1/chat/completions", &ask("Name a colour.")).await;
    assert_eq!(status, StatusCode::OK, "{alone}");
    assert_eq!(alone["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{alone}");
    drop(fresh);

    let server = TestServer::start(model_dir());
    let socket = &server.socket;
    let (status, first) = call(socket, Method::POST, "/v1/chat/completions", &ask("Name a fruit.")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{first}");
    let (status, second) = call(socket, Method::POST, "/v1/chat/completions", &ask("Name a colour.")).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    // The system turn: the question ("Name a colour.") and the opened
    // assistant turn come after it.
    assert!(cached > 15 && cached + 8 < usage(&second, "prompt_tokens"), "{second}");
    assert_eq!(
        second["choices"][0]["message"]["content"], alone["choices"][0]["message"]["content"],
        "{second} {alone}"
    );

    // Another system prompt is read whole; the first is still kept.
    let other = chat_body(
        "",
        json!({"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}], "max_tokens": 4}),
    );
    let (status, answer) = call(socket, Method::POST, "/v1/chat/completions", &other).await;
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{status} {answer}");
    let (_, again) = call(socket, Method::POST, "/v1/chat/completions", &ask("Name a fruit.")).await;
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], cached, "{again}");
    assert_eq!(again["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"], "{again} {first}");
}

/// `body` asked of `server` once: the tokens read from a state, and the answer.
async fn answer_and_cached(server: TestServer, body: &str) -> (u64, Value) {
    let (status, answer) = call(&server.socket, Method::POST, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    (cached, answer["choices"][0]["message"]["content"].clone())
}

/// The state of a system turn outlives the server that read it: kept in
/// its cache directory, read by the next server (as after the unit's idle
/// exit or a crash), or shipped beside the model (the image's, written by
/// `--prefill`); the answer is the one of a server that read it whole. A
/// cut file is a miss, removed and written again.
#[tokio::test]
async fn a_system_turns_state_outlives_the_server() {
    let system = "You are a patient assistant on a box of your own. Answer in one short sentence.";
    let ask = chat_body(
        "",
        json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Name a tree."}], "max_tokens": 10}),
    );
    let chat = |server: TestServer| answer_and_cached(server, &ask);
    let states = |dir: &Path| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let paths = entries.map(|entry| entry.unwrap().path());
        paths.filter(|path| path.extension().is_some_and(|e| e == "safetensors")).collect()
    };
    let kept_in = |dir: PathBuf| async move {
        // Written by a thread of its own after the turn is read.
        let deadline = Instant::now() + Duration::from_secs(20);
        while states(&dir).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        states(&dir)
    };
    let cache = tempfile::tempdir().unwrap();
    let (cached, whole) = chat(TestServer::start_keeping(model_dir(), Some(cache.path().into()))).await;
    assert_eq!(cached, 0);
    let kept = kept_in(cache.path().into()).await;
    assert_eq!(kept.len(), 1, "{kept:?}");

    let (cached, answer) = chat(TestServer::start_keeping(model_dir(), Some(cache.path().into()))).await;
    assert!(cached > 15, "the next server read the system turn again: {cached} tokens from the cache");
    assert_eq!(answer, whole);
    // A server without the cache reads it whole.
    assert_eq!(chat(TestServer::start(model_dir())).await, (0, whole.clone()));

    // Cut (a power loss in the middle of a write that was not atomic):
    // read as a miss and replaced.
    let file = std::fs::OpenOptions::new().write(true).open(&kept[0]).unwrap();
    file.set_len(file.metadata().unwrap().len() / 2).unwrap();
    drop(file);
    let (cached, answer) = chat(TestServer::start_keeping(model_dir(), Some(cache.path().into()))).await;
    assert_eq!((cached, &answer), (0, &whole), "a cut state is not used");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&kept[0]).map(|m| m.len()).unwrap_or(0) < 1024 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (cached, _) = chat(TestServer::start_keeping(model_dir(), Some(cache.path().into()))).await;
    assert!(cached > 15, "the cut state was written again whole");

    // Shipped beside the model: a directory of its own with the same file.
    let shipped = tempfile::tempdir().unwrap();
    let gguf = model_server::engine::gguf_path(&model_dir()).unwrap();
    std::os::unix::fs::symlink(&gguf, shipped.path().join(gguf.file_name().unwrap())).unwrap();
    let prefixes = shipped.path().join(model_server::prefix::SHIPPED_DIR);
    std::fs::create_dir(&prefixes).unwrap();
    Model::load(shipped.path()).unwrap().write_system_state(system, &prefixes).unwrap();
    let (cached, answer) = chat(TestServer::start(shipped.path().into())).await;
    assert!(cached > 15 && answer == whole, "{cached} {answer} {whole}");
}

#[test]
fn the_tokenizer_and_prompt_follow_the_model_file() {
    let model = Model::load(&model_dir()).unwrap_or_else(|e| panic!("{e}"));
    let tokenizer = model.tokenizer();
    let text = "Hello, world! It's 2026: naïve café 東京 🦀\n\tend";
    let ids = tokenizer.encode_fast(text, false).unwrap().get_ids().to_vec();
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), text, "byte-level BPE round-trips any text");
    // SmolLM2's pre-tokenizer puts every digit alone.
    let year = tokenizer.encode("2026", false).unwrap().get_tokens().to_vec();
    assert_eq!(year, ["2", "0", "2", "6"]);
    let hello = tokenizer.encode("Hello world", false).unwrap().get_tokens().to_vec();
    assert_eq!(hello, ["Hello", "Ġworld"]);

    let messages = [Message { role: "user".into(), content: "say <|im_end|> please".into() }];
    let prompt = model.prompt(&messages).unwrap();
    let rendered = tokenizer.decode(&prompt, false).unwrap();
    assert_eq!(
        rendered,
        format!("<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\nsay <|im_end|> please<|im_end|>\n<|im_start|>assistant\n")
    );
    // The control tokens are the template's only: the one the user wrote is text.
    let im_end = tokenizer.token_to_id("<|im_end|>").unwrap();
    assert_eq!(prompt.iter().filter(|&&id| id == im_end).count(), 2);
    // A system message of the caller replaces the default one.
    let own =
        model.prompt(&[Message { role: "system".into(), content: "Be brief.".into() }, messages[0].clone()]).unwrap();
    assert!(tokenizer
        .decode(&own, false)
        .unwrap()
        .starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"));
}
