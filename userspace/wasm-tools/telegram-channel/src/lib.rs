//! `telegram-channel`: the Telegram channel component (specs/channels):
//! the `clawos:channel` world's exports over `clawos-telegram`, which holds
//! the protocol and is tested natively against the fake Bot API. This file
//! only converts between the interface's types and the crate's.
//!
//! The world gives it no host interface: no HTTP, no files, no secret (the
//! WASI that Rust's standard library links is the host's deny-by-default
//! one). The host makes the requests, with the bot token where a path says
//! `{secret}`.

wit_bindgen::generate!({ path: "../../../specs/wit/channel", world: "channel" });

// The world's `use` puts request, response, batch and channel-error at the root.
use clawos::channel::types::{Header, Inbound};

fn request(request: clawos_telegram::Request) -> Request {
    Request {
        method: request.method,
        path: request.path,
        headers: request.headers.into_iter().map(|(name, value)| Header { name, value }).collect(),
        body: request.body,
    }
}

fn response(response: Response) -> clawos_telegram::Response {
    clawos_telegram::Response { status: response.status, body: response.body }
}

fn error(error: clawos_telegram::ChannelError) -> ChannelError {
    match error {
        clawos_telegram::ChannelError::RetryAfter(seconds) => ChannelError::RetryAfter(seconds),
        clawos_telegram::ChannelError::Conflict(why) => ChannelError::Conflict(why),
        clawos_telegram::ChannelError::Rejected(why) => ChannelError::Rejected(why),
        clawos_telegram::ChannelError::Failed(why) => ChannelError::Failed(why),
    }
}

struct Telegram;

impl Guest for Telegram {
    fn poll_request(cursor: Option<String>, timeout_seconds: u32) -> Request {
        request(clawos_telegram::poll_request(cursor.as_deref(), timeout_seconds))
    }

    fn poll_response(answer: Response) -> Result<Batch, ChannelError> {
        let batch = clawos_telegram::poll_response(&response(answer)).map_err(error)?;
        Ok(Batch {
            messages: batch
                .messages
                .into_iter()
                .map(|m| Inbound { id: m.id, chat: m.chat, sender: m.sender, text: m.text })
                .collect(),
            cursor: batch.cursor,
            malformed: batch.malformed,
        })
    }

    fn send_requests(chat: String, text: String) -> Vec<Request> {
        clawos_telegram::send_requests(&chat, &text).into_iter().map(request).collect()
    }

    fn send_response(answer: Response) -> Result<(), ChannelError> {
        clawos_telegram::send_response(&response(answer)).map_err(error)
    }
}

export!(Telegram);
