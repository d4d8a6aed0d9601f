//! The fake against a plain HTTP client, as a channel's host would call
//! it: the offset, the long poll, the limit on a message's length, each
//! fault, and the control paths a shell uses.

use std::time::{Duration, Instant};

use bytes::Bytes;
use clawos_telegram_fake::{Fake, Fault};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

const TOKEN: &str = "123456:test-token";

async fn call(fake: &Fake, path: &str, body: Value) -> Result<(u16, Value), hyper_util::client::legacy::Error> {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = hyper::Request::post(format!("{}{path}", fake.api_base()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Ok((status, serde_json::from_slice(&bytes).unwrap()))
}

async fn api(fake: &Fake, method: &str, body: Value) -> (u16, Value) {
    call(fake, &format!("/bot{TOKEN}/{method}"), body).await.unwrap()
}

fn ids(answer: &Value) -> Vec<i64> {
    answer["result"].as_array().unwrap().iter().map(|u| u["update_id"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn the_offset_confirms_what_is_below_it_and_a_long_poll_waits_for_the_next_update() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let first = fake.message(7, 7, "one");
    fake.message(7, 7, "two");
    let (status, answer) = api(&fake, "getUpdates", json!({})).await;
    assert_eq!((status, ids(&answer)), (200, vec![first, first + 1]));
    assert_eq!(answer["result"][0]["message"]["text"], "one");
    // Not confirmed yet: asked again, they come again.
    assert_eq!(ids(&api(&fake, "getUpdates", json!({"offset": first})).await.1), vec![first, first + 1]);
    // Confirmed: gone, even for a poll without an offset.
    let (_, answer) = api(&fake, "getUpdates", json!({"offset": first + 2, "timeout": 0})).await;
    assert!(ids(&answer).is_empty());
    assert!(ids(&api(&fake, "getUpdates", json!({})).await.1).is_empty());
    // A long poll answers as soon as an update arrives.
    let started = Instant::now();
    let waiting = api(&fake, "getUpdates", json!({"offset": first + 2, "timeout": 20}));
    let push = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        fake.message(7, 7, "three")
    };
    let ((_, answer), third) = tokio::join!(waiting, push);
    assert_eq!(ids(&answer), vec![third]);
    assert!(started.elapsed() < Duration::from_secs(10), "it did not wait out its timeout");
    assert_eq!(fake.polls().last().unwrap()["timeout"], 20);
}

#[tokio::test]
async fn messages_are_sent_up_to_the_limit_and_a_wrong_token_is_unauthorized() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let (status, answer) = api(&fake, "sendMessage", json!({"chat_id": 7, "text": "hello"})).await;
    assert_eq!((status, answer["result"]["text"].as_str()), (200, Some("hello")));
    let long = "é".repeat(4097);
    let (status, answer) = api(&fake, "sendMessage", json!({"chat_id": 7, "text": long})).await;
    assert_eq!((status, answer["description"].as_str()), (400, Some("Bad Request: message is too long")));
    assert_eq!(api(&fake, "sendMessage", json!({"chat_id": 7, "text": "é".repeat(4096)})).await.0, 200);
    assert_eq!(fake.sent().len(), 2);
    let (status, answer) = call(&fake, "/botwrong/getMe", json!({})).await.unwrap();
    assert_eq!((status, answer["ok"].as_bool()), (401, Some(false)));
}

#[tokio::test]
async fn each_fault_answers_as_telegram_would_then_polls_go_on() {
    let fake = Fake::start(TOKEN).await.unwrap();
    fake.message(7, 7, "kept");
    fake.fault(false, Fault::Conflict);
    fake.fault(false, Fault::RetryAfter(3));
    fake.fault(false, Fault::Error);
    fake.fault(false, Fault::Reset);
    fake.fault(false, Fault::Stall(Duration::from_millis(700)));
    let (status, answer) = api(&fake, "getUpdates", json!({})).await;
    assert_eq!((status, answer["error_code"].as_i64()), (409, Some(409)));
    let (status, answer) = api(&fake, "getUpdates", json!({})).await;
    assert_eq!((status, answer["parameters"]["retry_after"].as_i64()), (429, Some(3)));
    assert_eq!(api(&fake, "getUpdates", json!({})).await.0, 500);
    assert!(call(&fake, &format!("/bot{TOKEN}/getUpdates"), json!({})).await.is_err(), "the connection was reset");
    let started = Instant::now();
    let (_, stalled) = api(&fake, "getUpdates", json!({})).await;
    assert!(started.elapsed() >= Duration::from_millis(700) && ids(&stalled).is_empty());
    assert_eq!(ids(&api(&fake, "getUpdates", json!({})).await.1).len(), 1, "the update outlived the faults");
    fake.fault(true, Fault::RetryAfter(1));
    assert_eq!(api(&fake, "sendMessage", json!({"chat_id": 7, "text": "x"})).await.0, 429);
    assert!(fake.sent().is_empty());
}

#[tokio::test]
async fn the_control_paths_script_messages_floods_malformed_updates_and_faults() {
    let fake = Fake::start(TOKEN).await.unwrap();
    let (status, id) = call(&fake, "/control/message", json!({"from": 5, "chat": 5, "text": "hi"})).await.unwrap();
    assert_eq!((status, id["result"].as_i64()), (200, Some(1)));
    call(&fake, "/control/raw", json!({"message": "not a message"})).await.unwrap();
    let (_, flood) = call(&fake, "/control/flood", json!({"from": 5, "chat": 5, "count": 150})).await.unwrap();
    assert_eq!(flood["result"].as_array().unwrap().len(), 150);
    let (_, first) = api(&fake, "getUpdates", json!({})).await;
    assert_eq!(ids(&first).len(), 100, "at most 100 a poll");
    assert_eq!(first["result"][1]["message"], "not a message");
    call(&fake, "/control/fault", json!({"kind": "retry_after", "seconds": 2})).await.unwrap();
    assert_eq!(api(&fake, "getUpdates", json!({})).await.0, 429);
    api(&fake, "sendMessage", json!({"chat_id": 5, "text": "answer"})).await;
    let (_, sent) = call(&fake, "/control/sent", Value::Null).await.unwrap();
    assert_eq!(sent["result"], json!([{"chat_id": 5, "text": "answer"}]));
    let (status, _) = call(&fake, "/control/fault", json!({"kind": "sideways"})).await.unwrap();
    assert_eq!(status, 400);
}
