//! The protocol against the fake Bot API over real HTTP, with a host as
//! small as a test can make it: the secret put into the path, the
//! requests made as asked, the cursor carried from poll to poll.

use bytes::Bytes;
use clawos_telegram::{poll_request, poll_response, send_requests, send_response, ChannelError, Request, Response};
use clawos_telegram_fake::{Fake, Fault};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

const TOKEN: &str = "4242:secret-token";

async fn make(fake: &Fake, request: Request) -> Response {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let path = request.path.replace("{secret}", TOKEN);
    let mut builder =
        hyper::Request::builder().method(request.method.as_str()).uri(format!("{}{path}", fake.api_base()));
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let response = client.request(builder.body(Full::new(Bytes::from(request.body))).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    Response { status, body: response.into_body().collect().await.unwrap().to_bytes().to_vec() }
}

#[tokio::test]
async fn messages_come_once_in_order_and_a_long_answer_arrives_in_parts() {
    let fake = Fake::start(TOKEN).await.unwrap();
    fake.message(7, 70, "first");
    fake.raw(serde_json::json!({"message": 12}));
    fake.message(8, 80, "second");
    let batch = poll_response(&make(&fake, poll_request(None, 0)).await).unwrap();
    let texts: Vec<&str> = batch.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!((texts, batch.malformed), (vec!["first", "second"], 1));
    // The next poll from the cursor confirms them: nothing comes twice.
    let again = poll_response(&make(&fake, poll_request(batch.cursor.as_deref(), 0)).await).unwrap();
    assert!(again.messages.is_empty() && again.cursor.is_none());
    assert_eq!(fake.polls()[1]["offset"].as_i64(), batch.cursor.as_deref().map(|c| c.parse().unwrap()));

    let answer = format!("{}\n", "a line of the answer ".repeat(20)).repeat(30);
    for request in send_requests("70", &answer) {
        send_response(&make(&fake, request).await).unwrap();
    }
    let sent = fake.sent();
    assert!(sent.len() > 1);
    let joined: String = sent.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(joined, answer);
    assert!(sent.iter().all(|m| m["chat_id"] == 70));
}

#[tokio::test]
async fn the_fakes_faults_read_as_what_the_loop_must_do() {
    let fake = Fake::start(TOKEN).await.unwrap();
    fake.fault(false, Fault::RetryAfter(9));
    fake.fault(false, Fault::Conflict);
    fake.fault(false, Fault::Error);
    assert_eq!(poll_response(&make(&fake, poll_request(None, 0)).await), Err(ChannelError::RetryAfter(9)));
    assert!(matches!(poll_response(&make(&fake, poll_request(None, 0)).await), Err(ChannelError::Conflict(_))));
    assert!(matches!(poll_response(&make(&fake, poll_request(None, 0)).await), Err(ChannelError::Failed(_))));
    let mut wrong = poll_request(None, 0);
    wrong.path = wrong.path.replace("{secret}", "not-the-token");
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let response = client
        .request(
            hyper::Request::post(format!("{}{}", fake.api_base(), wrong.path)).body(Full::new(Bytes::new())).unwrap(),
        )
        .await
        .unwrap();
    let response = Response {
        status: response.status().as_u16(),
        body: response.into_body().collect().await.unwrap().to_bytes().to_vec(),
    };
    assert!(matches!(poll_response(&response), Err(ChannelError::Rejected(_))));
}
