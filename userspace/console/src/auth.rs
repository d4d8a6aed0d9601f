//! Login links and sessions (specs/console/README.md, "Logging in").
//!
//! A login token is handed to the operator by `clawctl console` and may be
//! redeemed once, within [`LOGIN_TTL`], for a session; a session lives
//! while it is used at least every [`SESSION_IDLE`]. Both are 32 random
//! bytes, base64url, and only their SHA-256 is kept, in memory: a restart
//! ends every session, and nothing about them is ever written to disk.
//!
//! Owns: issuing, redeeming and expiring tokens. Must not own: how a token
//! reaches the operator (IPC, `clawctl`) or the cookie's attributes
//! (`crate::guard`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// How long a login link may wait to be opened.
pub const LOGIN_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a session lives without a request.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// Login links waiting at once; issuing one more forgets the oldest.
const MAX_LOGINS: usize = 16;
/// Sessions at once; one more ends the least recently used.
const MAX_SESSIONS: usize = 64;

/// Why a login token was not accepted. The page shown says only that the
/// link is not valid (which of these it was helps nobody guessing).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// Not a token this console issued, or already redeemed.
    #[error("the login link is unknown or was used already")]
    Unknown,
    /// Issued, but opened after [`LOGIN_TTL`].
    #[error("the login link expired")]
    Expired,
}

type Digest32 = [u8; 32];

/// The console's login tokens and sessions.
#[derive(Default)]
pub struct Tokens {
    /// A waiting login's digest and when it was issued.
    logins: Mutex<HashMap<Digest32, Instant>>,
    /// A session's digest and when it was last used.
    sessions: Mutex<HashMap<Digest32, Instant>>,
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The kernel's CSPRNG; failing to read it is a broken system, and a
    // console that cannot make tokens must not make guessable ones.
    getrandom::fill(&mut bytes).expect("getrandom");
    URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(token: &str) -> Digest32 {
    Sha256::digest(token.as_bytes()).into()
}

/// Forgets the entry least recently stamped when `map` is full.
fn make_room(map: &mut HashMap<Digest32, Instant>, capacity: usize) {
    while map.len() >= capacity {
        let Some(oldest) = map.iter().min_by_key(|(_, stamp)| **stamp).map(|(key, _)| *key) else { return };
        map.remove(&oldest);
    }
}

impl Tokens {
    /// A new login token, valid once for [`LOGIN_TTL`] from `now`.
    pub fn issue_login(&self, now: Instant) -> String {
        let token = random_token();
        let mut logins = self.logins.lock().unwrap_or_else(PoisonError::into_inner);
        logins.retain(|_, issued| now.saturating_duration_since(*issued) < LOGIN_TTL);
        make_room(&mut logins, MAX_LOGINS);
        logins.insert(digest(&token), now);
        token
    }

    /// Redeems login `token` for a new session's token. A token is taken
    /// out whatever the outcome: it never works twice.
    pub fn redeem_login(&self, token: &str, now: Instant) -> Result<String, LoginError> {
        let issued = self
            .logins
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&digest(token))
            .ok_or(LoginError::Unknown)?;
        if now.saturating_duration_since(issued) >= LOGIN_TTL {
            return Err(LoginError::Expired);
        }
        let session = random_token();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, used| now.saturating_duration_since(*used) < SESSION_IDLE);
        make_room(&mut sessions, MAX_SESSIONS);
        sessions.insert(digest(&session), now);
        Ok(session)
    }

    /// Whether `session` is live at `now`; a live one is stamped as used.
    pub fn touch_session(&self, session: &str, now: Instant) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let key = digest(session);
        match sessions.get_mut(&key) {
            Some(used) if now.saturating_duration_since(*used) < SESSION_IDLE => {
                *used = now;
                true
            }
            Some(_) => {
                sessions.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Ends `session` (logging out); unknown sessions are ignored.
    pub fn end_session(&self, session: &str) {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).remove(&digest(session));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_token_is_redeemed_once_for_a_session() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let login = tokens.issue_login(now);
        assert_eq!(URL_SAFE_NO_PAD.decode(&login).unwrap().len(), 32);
        let session = tokens.redeem_login(&login, now + Duration::from_secs(1)).unwrap();
        assert_ne!(session, login);
        assert!(tokens.touch_session(&session, now + Duration::from_secs(2)));
        assert_eq!(tokens.redeem_login(&login, now + Duration::from_secs(3)), Err(LoginError::Unknown));
        assert!(!tokens.touch_session(&login, now), "a login token is no session");
        assert_eq!(tokens.redeem_login("made-up", now), Err(LoginError::Unknown));
    }

    #[test]
    fn a_login_token_expires_and_cannot_be_retried_after() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let login = tokens.issue_login(now);
        assert_eq!(tokens.redeem_login(&login, now + LOGIN_TTL), Err(LoginError::Expired));
        assert_eq!(tokens.redeem_login(&login, now), Err(LoginError::Unknown));
    }

    #[test]
    fn a_session_lives_while_used_and_ends_idle_or_at_logout() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let session = tokens.redeem_login(&tokens.issue_login(now), now).unwrap();
        let almost = SESSION_IDLE - Duration::from_secs(1);
        assert!(tokens.touch_session(&session, now + almost));
        assert!(tokens.touch_session(&session, now + almost * 2), "each use renews it");
        assert!(!tokens.touch_session(&session, now + almost * 2 + SESSION_IDLE));
        let other = tokens.redeem_login(&tokens.issue_login(now), now).unwrap();
        tokens.end_session(&other);
        assert!(!tokens.touch_session(&other, now));
    }

    #[test]
    fn waiting_logins_and_sessions_are_bounded_oldest_first() {
        let tokens = Tokens::default();
        let start = Instant::now();
        let first = tokens.issue_login(start);
        for second in 1..=MAX_LOGINS as u64 {
            tokens.issue_login(start + Duration::from_secs(second));
        }
        assert_eq!(tokens.redeem_login(&first, start), Err(LoginError::Unknown));
        assert_eq!(tokens.logins.lock().unwrap().len(), MAX_LOGINS);
        let sessions: Vec<String> = (0..=MAX_SESSIONS as u64)
            .map(|second| {
                let at = start + Duration::from_secs(second);
                tokens.redeem_login(&tokens.issue_login(at), at).unwrap()
            })
            .collect();
        assert!(!tokens.touch_session(&sessions[0], start), "the least recently used ended");
        assert!(tokens.touch_session(&sessions[MAX_SESSIONS], start + Duration::from_secs(100)));
    }
}
