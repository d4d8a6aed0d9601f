//! Standard Webhooks signatures (specs/channels/README.md, "Webhooks"):
//! `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,<base64
//! HMAC-SHA256 of "id.timestamp.body">`, several separated by spaces) under
//! `whsec_` keys, as the reference library computes them.
//!
//! A channel has several keys, so one can be rotated in while the old one
//! still verifies: inbound is accepted when any key verifies, outbound is
//! signed with the newest (the last). A replayed ID is refused by the
//! caller's record of IDs seen ([`crate::store::Store::first_sight`]).

use http::{HeaderMap, HeaderValue};
use standardwebhooks::{Webhook, WebhookError, HEADER_WEBHOOK_ID, HEADER_WEBHOOK_SIGNATURE, HEADER_WEBHOOK_TIMESTAMP};

/// How far a timestamp may be from now, either way, and how long a
/// seen ID is kept: the reference library's tolerance.
pub const WINDOW_SECONDS: i64 = 5 * 60;

/// Why an inbound webhook was refused; each is counted by its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A header is missing or not text.
    #[error("the {0} header is missing or unreadable")]
    Header(&'static str),
    /// The timestamp is not a number, or too far from now.
    #[error("the timestamp is more than {WINDOW_SECONDS} s from now, or not a number")]
    Timestamp,
    /// No signature verifies under any of the channel's keys.
    #[error("no signature verifies under the channel's keys")]
    Signature,
    /// The ID was seen within the window.
    #[error("webhook {0} was already received")]
    Replayed(String),
    /// The body is not UTF-8 (the signed string is text).
    #[error("the body is not UTF-8")]
    Body,
}

impl Refused {
    /// The reason's name, as its counter is labelled.
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Header(_) => "header",
            Refused::Timestamp => "timestamp",
            Refused::Signature => "signature",
            Refused::Replayed(_) => "replayed",
            Refused::Body => "body",
        }
    }
}

/// A key that does not parse (`whsec_` and base64).
#[derive(Debug, thiserror::Error)]
#[error("a webhook key is not whsec_ and base64: {0}")]
pub struct BadKey(String);

/// A channel's keys, oldest first.
pub struct Keys(Vec<Webhook>);

impl Keys {
    /// Parses `keys` (`whsec_<base64>`), oldest first; at least one.
    pub fn new<S: AsRef<str>>(keys: &[S]) -> Result<Keys, BadKey> {
        if keys.is_empty() {
            return Err(BadKey("no key".into()));
        }
        let keys = keys.iter().map(|key| Webhook::new(key.as_ref()).map_err(|e| BadKey(e.to_string())));
        Ok(Keys(keys.collect::<Result<_, _>>()?))
    }

    /// Checks an inbound webhook's signature and timestamp under any key,
    /// then that its ID is new (`first_sight`, which records it). The ID
    /// is recorded only for a message that verified, so a forger cannot
    /// use up a real message's ID.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        first_sight: impl FnOnce(&str) -> bool,
    ) -> Result<(), Refused> {
        let mut refused = Refused::Signature;
        for key in &self.0 {
            match key.verify(body, headers) {
                Ok(()) => {
                    let id = header(headers, HEADER_WEBHOOK_ID)?;
                    return if first_sight(id) { Ok(()) } else { Err(Refused::Replayed(id.to_owned())) };
                }
                Err(error) => refused = refusal(&error),
            }
            // A timestamp or header refusal is the same under every key.
            if refused != Refused::Signature {
                break;
            }
        }
        Err(refused)
    }

    /// The headers that sign `body` as webhook `id` at `timestamp` (Unix
    /// seconds) with the newest key.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> Result<HeaderMap, Refused> {
        let newest = self.0.last().expect("Keys holds at least one");
        let signature = newest.sign(id, timestamp, body).map_err(|error| refusal(&error))?;
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (HEADER_WEBHOOK_ID, id.to_owned()),
            (HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string()),
            (HEADER_WEBHOOK_SIGNATURE, signature),
        ] {
            headers.insert(name, HeaderValue::from_str(&value).map_err(|_| Refused::Header(name))?);
        }
        Ok(headers)
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, Refused> {
    headers.get(name).and_then(|value| value.to_str().ok()).ok_or(Refused::Header(name))
}

fn refusal(error: &WebhookError) -> Refused {
    match error {
        WebhookError::MissingHeader(name) | WebhookError::InvalidHeader(name) => Refused::Header(match *name {
            "id" => HEADER_WEBHOOK_ID,
            "timestamp" => HEADER_WEBHOOK_TIMESTAMP,
            _ => HEADER_WEBHOOK_SIGNATURE,
        }),
        WebhookError::InvalidTimestamp | WebhookError::TimestampTooOldError | WebhookError::FutureTimestampError => {
            Refused::Timestamp
        }
        WebhookError::InvalidPayload => Refused::Body,
        _ => Refused::Signature,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::{SystemTime, UNIX_EPOCH};

    use proptest::prelude::*;

    use super::{Keys, Refused, WINDOW_SECONDS};

    const OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const NEW: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

    fn now() -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
    }

    #[test]
    fn a_message_signed_with_either_key_of_a_rotation_verifies_once() {
        let receiver = Keys::new(&[OLD, NEW]).unwrap();
        let mut seen = HashSet::new();
        for sender in [Keys::new(&[OLD]).unwrap(), Keys::new(&[OLD, NEW]).unwrap()] {
            let id = format!("msg_{}", seen.len());
            let headers = sender.sign(&id, now(), br#"{"text":"hi"}"#).unwrap();
            assert_eq!(receiver.verify(&headers, br#"{"text":"hi"}"#, |id| seen.insert(id.to_owned())), Ok(()));
            let again = receiver.verify(&headers, br#"{"text":"hi"}"#, |id| seen.insert(id.to_owned()));
            assert_eq!(again, Err(Refused::Replayed(id)));
        }
    }

    #[test]
    fn a_stale_or_future_timestamp_another_key_and_a_missing_header_are_refused_and_record_nothing() {
        let keys = Keys::new(&[NEW]).unwrap();
        let body = b"{}";
        let mut recorded = false;
        for at in [now() - WINDOW_SECONDS - 5, now() + WINDOW_SECONDS + 5] {
            let headers = keys.sign("msg_t", at, body).unwrap();
            assert_eq!(
                keys.verify(&headers, body, |_| {
                    recorded = true;
                    true
                }),
                Err(Refused::Timestamp)
            );
        }
        let forged = Keys::new(&[OLD]).unwrap().sign("msg_f", now(), body).unwrap();
        assert_eq!(
            keys.verify(&forged, body, |_| {
                recorded = true;
                true
            }),
            Err(Refused::Signature)
        );
        let mut headers = keys.sign("msg_h", now(), body).unwrap();
        headers.remove("webhook-id");
        assert_eq!(
            keys.verify(&headers, body, |_| {
                recorded = true;
                true
            }),
            Err(Refused::Header("webhook-id"))
        );
        assert!(!recorded, "only a verified message's ID is recorded");
        assert!(Keys::new::<&str>(&[]).is_err());
        assert!(Keys::new(&["whsec_not base64!"]).is_err());
    }

    proptest! {
        /// Any change to the body or the ID breaks the signature.
        #[test]
        fn a_changed_byte_breaks_the_signature(body in "[ -~]{1,200}", flip in 0usize..200, id in "[a-z0-9_]{1,20}") {
            let keys = Keys::new(&[NEW]).unwrap();
            let headers = keys.sign(&id, now(), body.as_bytes()).unwrap();
            prop_assert_eq!(keys.verify(&headers, body.as_bytes(), |_| true), Ok(()));
            let mut changed = body.clone().into_bytes();
            let at = flip % changed.len();
            changed[at] = if changed[at] == b'a' { b'b' } else { b'a' };
            prop_assert_eq!(keys.verify(&headers, &changed, |_| true), Err(Refused::Signature));
            let mut other = headers.clone();
            other.insert("webhook-id", format!("{id}x").parse().unwrap());
            prop_assert_eq!(keys.verify(&other, body.as_bytes(), |_| true), Err(Refused::Signature));
        }
    }
}
