//! Login links and sessions (specs/console/README.md, "Logging in").
//!
//! A login token is made by `clawctl console` ([`issue_login`], run by the
//! operator on the box) and may be redeemed once, within [`LOGIN_TTL`], for
//! a session; a session lives while it is used at least every
//! [`SESSION_IDLE`]. Both are 32 random bytes, base64url, and only their
//! SHA-256 is kept.
//!
//! A waiting login is an empty file in [`LOGINS_DIR`] named by the hex of
//! its token's SHA-256, its modification time the moment it was issued. The
//! directory is the console user's, mode 0700 (tmpfiles.d/clawos-console.conf),
//! on /run: only root (an operator, `clawctl`) and the console reach it, a
//! reboot empties it, and a file's name is useless to whoever reads it,
//! since the token is what must be presented. Files, not an IPC method,
//! because the console is no IPC server: it only calls the components.
//! Sessions are kept in the console's memory alone: a restart of the
//! console ends them all, and nothing about them is ever written down.
//!
//! Owns: issuing, redeeming and expiring tokens. Must not own: how a link
//! reaches the operator (`clawctl console`) or the cookie's attributes
//! (`crate::guard`).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// Where waiting logins are kept.
pub const LOGINS_DIR: &str = "/run/clawos-console/logins";
/// How long a login link may wait to be opened.
pub const LOGIN_TTL: Duration = Duration::from_secs(5 * 60);
/// How far in the future a login's time may be and still count (the clock
/// stepped back after it was issued): beyond, it is refused as expired.
const CLOCK_SLACK: Duration = Duration::from_secs(60);
/// How long a session lives without a request.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// Login links waiting at once; issuing one more forgets the oldest.
const MAX_LOGINS: usize = 16;
/// Sessions at once; one more ends the least recently used.
const MAX_SESSIONS: usize = 64;

/// Why a login token was not accepted. The page shown says only that the
/// link is not valid (which of these it was helps nobody guessing).
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Not a token `clawctl console` issued, or already redeemed.
    #[error("the login link is unknown or was used already")]
    Unknown,
    /// Issued, but opened after [`LOGIN_TTL`].
    #[error("the login link expired")]
    Expired,
    /// The logins' directory could not be read or changed.
    #[error("the waiting logins cannot be read: {0}")]
    Store(#[source] io::Error),
}

type Digest32 = [u8; 32];

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

fn hex(digest: &Digest32) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether a login issued at `issued` is still valid at `now`.
fn login_valid(issued: SystemTime, now: SystemTime) -> bool {
    match now.duration_since(issued) {
        Ok(age) => age < LOGIN_TTL,
        Err(ahead) => ahead.duration() <= CLOCK_SLACK,
    }
}

/// Makes a login token valid once for [`LOGIN_TTL`] from now, kept in
/// `dir`; expired logins are removed, and the oldest while [`MAX_LOGINS`]
/// wait. Run by `clawctl console` as root.
pub fn issue_login(dir: &Path) -> io::Result<String> {
    let now = SystemTime::now();
    let mut waiting: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let issued = entry.metadata()?.modified()?;
        if login_valid(issued, now) {
            waiting.push((issued, entry.path()));
        } else {
            remove_if_present(&entry.path())?;
        }
    }
    waiting.sort();
    for (_, oldest) in waiting.iter().take((waiting.len() + 1).saturating_sub(MAX_LOGINS)) {
        remove_if_present(oldest)?;
    }
    let token = random_token();
    // Created, never opened for writing again: its time is when it was
    // issued. Its reader is the console, through the directory's owner.
    fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(dir.join(hex(&digest(&token))))?;
    Ok(token)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// The console's side: redeems logins, keeps sessions.
pub struct Tokens {
    logins: PathBuf,
    /// A session's digest and when it was last used.
    sessions: Mutex<HashMap<Digest32, Instant>>,
}

/// Forgets the entry least recently stamped when `map` is full.
fn make_room(map: &mut HashMap<Digest32, Instant>, capacity: usize) {
    while map.len() >= capacity {
        let Some(oldest) = map.iter().min_by_key(|(_, stamp)| **stamp).map(|(key, _)| *key) else { return };
        map.remove(&oldest);
    }
}

impl Tokens {
    /// Redeems the logins waiting in `logins` (normally [`LOGINS_DIR`]).
    pub fn new(logins: impl Into<PathBuf>) -> Self {
        Tokens { logins: logins.into(), sessions: Mutex::default() }
    }

    /// Redeems login `token` for a new session's token. A token is taken
    /// out whatever the outcome: it never works twice.
    pub fn redeem_login(&self, token: &str, now: Instant) -> Result<String, LoginError> {
        let path = self.logins.join(hex(&digest(token)));
        let issued = match fs::metadata(&path).and_then(|meta| meta.modified()) {
            Ok(issued) => issued,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(LoginError::Unknown),
            Err(error) => return Err(LoginError::Store(error)),
        };
        // Whoever unlinks it redeems it: of two requests with one link, one wins.
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(LoginError::Unknown),
            Err(error) => return Err(LoginError::Store(error)),
        }
        if !login_valid(issued, SystemTime::now()) {
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

    fn tokens() -> (tempfile::TempDir, Tokens) {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::new(dir.path());
        (dir, tokens)
    }

    fn set_issued(dir: &Path, token: &str, issued: SystemTime) {
        let file = fs::File::options().write(true).open(dir.join(hex(&digest(token)))).unwrap();
        file.set_modified(issued).unwrap();
    }

    #[test]
    fn a_login_token_is_redeemed_once_for_a_session() {
        let (dir, tokens) = tokens();
        let now = Instant::now();
        let login = issue_login(dir.path()).unwrap();
        assert_eq!(URL_SAFE_NO_PAD.decode(&login).unwrap().len(), 32);
        let name = hex(&digest(&login));
        let files: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(files, [name.as_str()], "only the token's digest is written");
        let session = tokens.redeem_login(&login, now).unwrap();
        assert_ne!(session, login);
        assert!(tokens.touch_session(&session, now + Duration::from_secs(1)));
        assert!(matches!(tokens.redeem_login(&login, now), Err(LoginError::Unknown)));
        assert!(!tokens.touch_session(&login, now), "a login token is no session");
        assert!(matches!(tokens.redeem_login("made-up", now), Err(LoginError::Unknown)));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_login_token_expires_and_cannot_be_retried_after() {
        let (dir, tokens) = tokens();
        let now = Instant::now();
        let late = issue_login(dir.path()).unwrap();
        set_issued(dir.path(), &late, SystemTime::now() - LOGIN_TTL);
        assert!(matches!(tokens.redeem_login(&late, now), Err(LoginError::Expired)));
        assert!(matches!(tokens.redeem_login(&late, now), Err(LoginError::Unknown)));
        // Issued "in the future": the clock was stepped back since.
        let ahead = issue_login(dir.path()).unwrap();
        set_issued(dir.path(), &ahead, SystemTime::now() + CLOCK_SLACK / 2);
        assert!(tokens.redeem_login(&ahead, now).is_ok());
        let far = issue_login(dir.path()).unwrap();
        set_issued(dir.path(), &far, SystemTime::now() + CLOCK_SLACK * 2);
        assert!(matches!(tokens.redeem_login(&far, now), Err(LoginError::Expired)));
    }

    #[test]
    fn issuing_removes_expired_logins_and_the_oldest_beyond_the_bound() {
        let (dir, tokens) = tokens();
        let expired = issue_login(dir.path()).unwrap();
        set_issued(dir.path(), &expired, SystemTime::now() - LOGIN_TTL * 2);
        let start = SystemTime::now() - Duration::from_secs(100);
        let waiting: Vec<String> = (0..MAX_LOGINS as u64)
            .map(|second| {
                let token = issue_login(dir.path()).unwrap();
                set_issued(dir.path(), &token, start + Duration::from_secs(second));
                token
            })
            .collect();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), MAX_LOGINS, "the expired one is gone");
        let newest = issue_login(dir.path()).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), MAX_LOGINS);
        let now = Instant::now();
        assert!(matches!(tokens.redeem_login(&waiting[0], now), Err(LoginError::Unknown)), "the oldest went");
        assert!(tokens.redeem_login(&waiting[1], now).is_ok());
        assert!(tokens.redeem_login(&newest, now).is_ok());
    }

    #[test]
    fn a_login_store_that_cannot_be_read_is_an_error_not_an_unknown_link() {
        let tokens = Tokens::new("/proc/self/fdinfo/0/not-a-dir");
        assert!(matches!(tokens.redeem_login("any", Instant::now()), Err(LoginError::Store(_))));
    }

    #[test]
    fn a_session_lives_while_used_and_ends_idle_or_at_logout() {
        let (dir, tokens) = tokens();
        let now = Instant::now();
        let session = tokens.redeem_login(&issue_login(dir.path()).unwrap(), now).unwrap();
        let almost = SESSION_IDLE - Duration::from_secs(1);
        assert!(tokens.touch_session(&session, now + almost));
        assert!(tokens.touch_session(&session, now + almost * 2), "each use renews it");
        assert!(!tokens.touch_session(&session, now + almost * 2 + SESSION_IDLE));
        let other = tokens.redeem_login(&issue_login(dir.path()).unwrap(), now).unwrap();
        tokens.end_session(&other);
        assert!(!tokens.touch_session(&other, now));
    }

    #[test]
    fn sessions_are_bounded_least_recently_used_first() {
        let (dir, tokens) = tokens();
        let start = Instant::now();
        let sessions: Vec<String> = (0..=MAX_SESSIONS as u64)
            .map(|second| tokens.redeem_login(&issue_login(dir.path()).unwrap(), start + Duration::from_secs(second)))
            .map(Result::unwrap)
            .collect();
        assert!(!tokens.touch_session(&sessions[0], start), "the least recently used ended");
        assert!(tokens.touch_session(&sessions[MAX_SESSIONS], start + Duration::from_secs(100)));
    }
}
