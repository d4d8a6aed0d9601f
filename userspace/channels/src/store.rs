//! The channel database (specs/channels/README.md, "What is never lost or
//! repeated"): per channel, the cursor of its polls and each inbound
//! message once, with where its answer stands; per (channel, chat), the
//! agent's session; per channel, the webhook IDs seen within the replay
//! window.
//!
//! A poll's messages and the cursor past them are written in one
//! transaction, so after a crash both are there or neither is; a message
//! brought again is dropped by its key. A message's state only moves
//! forward: `received` → `dropped` | `answering` → `answered`.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

/// A store operation that failed: the database could not be read or
/// written (a full disk, a broken file).
#[derive(Debug, thiserror::Error)]
#[error("the channel database: {0}")]
pub struct Error(#[from] rusqlite::Error);

/// A message as a channel's component read it from a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The service's ID for it (Telegram's `update_id`), unique per channel.
    pub id: String,
    /// The conversation it came in (Telegram's chat ID): the answer goes there.
    pub chat: String,
    /// Who sent it (Telegram's user ID): what the allowlist names.
    pub sender: String,
    /// Its text.
    pub text: String,
}

/// Where a message's answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Kept, its turn not started.
    Received,
    /// Not answered, on purpose (a sender off the allowlist).
    Dropped,
    /// Its turn started.
    Answering,
    /// Its answer was sent.
    Answered,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Received => "received",
            State::Dropped => "dropped",
            State::Answering => "answering",
            State::Answered => "answered",
        }
    }

    fn parse(name: &str) -> rusqlite::Result<State> {
        Ok(match name {
            "received" => State::Received,
            "dropped" => State::Dropped,
            "answering" => State::Answering,
            "answered" => State::Answered,
            other => {
                return Err(rusqlite::Error::FromSqlConversionFailure(
                    0,
                    rusqlite::types::Type::Text,
                    format!("unknown state {other:?}").into(),
                ))
            }
        })
    }
}

/// A message whose answer is not done, as a restart finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The message.
    pub message: Inbound,
    /// `Received` or `Answering`.
    pub state: State,
    /// The turn of an `Answering` one.
    pub turn_id: Option<String>,
}

/// How many of a channel's messages are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Kept and not yet started.
    pub received: u64,
    /// Dropped (off the allowlist).
    pub dropped: u64,
    /// Being answered.
    pub answering: u64,
    /// Answered.
    pub answered: u64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cursors (
    channel TEXT PRIMARY KEY,
    cursor TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    chat TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    turn_id TEXT,
    PRIMARY KEY (channel, id)
);
CREATE INDEX IF NOT EXISTS messages_open ON messages (channel, state, seq);
CREATE TABLE IF NOT EXISTS sessions (
    channel TEXT NOT NULL,
    chat TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (channel, chat)
);
CREATE TABLE IF NOT EXISTS webhook_ids (
    channel TEXT NOT NULL,
    id TEXT NOT NULL,
    at_s INTEGER NOT NULL,
    PRIMARY KEY (channel, id)
);
";

/// The channel database.
pub struct Store {
    db: Connection,
}

impl Store {
    /// Opens (making it if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, Error> {
        let db = Connection::open(path)?;
        // A poll's messages are on disk before the next poll moves past
        // them at the service (Telegram forgets what an offset passed).
        db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;")?;
        db.execute_batch(SCHEMA)?;
        Ok(Store { db })
    }

    /// Where `channel`'s next poll starts; `None` before its first.
    pub fn cursor(&self, channel: &str) -> Result<Option<String>, Error> {
        Ok(self.db.query_row("SELECT cursor FROM cursors WHERE channel = ?1", [channel], |r| r.get(0)).optional()?)
    }

    /// Keeps a poll's `messages` (those already kept are dropped by their
    /// ID) and moves `channel`'s cursor to `cursor`, in one transaction.
    /// Returns how many were new.
    pub fn record_poll(&mut self, channel: &str, messages: &[Inbound], cursor: Option<&str>) -> Result<usize, Error> {
        let tx = self.db.transaction()?;
        let mut new = 0;
        {
            let mut seq: i64 =
                tx.query_row("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?1", [channel], |r| r.get(0))?;
            let mut insert = tx.prepare(
                "INSERT INTO messages (channel, id, seq, chat, sender, text, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'received')
                 ON CONFLICT (channel, id) DO NOTHING",
            )?;
            for message in messages {
                seq += 1;
                new += insert.execute(params![channel, message.id, seq, message.chat, message.sender, message.text])?;
            }
            if let Some(cursor) = cursor {
                tx.execute(
                    "INSERT INTO cursors (channel, cursor) VALUES (?1, ?2)
                     ON CONFLICT (channel) DO UPDATE SET cursor = excluded.cursor",
                    params![channel, cursor],
                )?;
            }
        }
        tx.commit()?;
        Ok(new)
    }

    /// `channel`'s messages whose answer is not done, oldest first.
    pub fn pending(&self, channel: &str) -> Result<Vec<Pending>, Error> {
        let mut q = self.db.prepare(
            "SELECT id, chat, sender, text, state, turn_id FROM messages
             WHERE channel = ?1 AND state IN ('received', 'answering') ORDER BY seq",
        )?;
        let rows = q.query_map([channel], |r| {
            Ok(Pending {
                message: Inbound { id: r.get(0)?, chat: r.get(1)?, sender: r.get(2)?, text: r.get(3)? },
                state: State::parse(&r.get::<_, String>(4)?)?,
                turn_id: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Moves message `id` from `from` to `to` (with the turn, for
    /// `Answering`); `false` when it was not in `from` (another task moved
    /// it, or it is unknown), and nothing changes.
    fn advance(&self, channel: &str, id: &str, from: State, to: State, turn_id: Option<&str>) -> Result<bool, Error> {
        let changed = self.db.execute(
            "UPDATE messages SET state = ?4, turn_id = COALESCE(?5, turn_id)
             WHERE channel = ?1 AND id = ?2 AND state = ?3",
            params![channel, id, from.name(), to.name(), turn_id],
        )?;
        Ok(changed == 1)
    }

    /// A received message that will not be answered (its sender is not
    /// allowed).
    pub fn drop_message(&self, channel: &str, id: &str) -> Result<bool, Error> {
        self.advance(channel, id, State::Received, State::Dropped, None)
    }

    /// A received message's turn started as `turn_id`.
    pub fn start_answer(&self, channel: &str, id: &str, turn_id: &str) -> Result<bool, Error> {
        self.advance(channel, id, State::Received, State::Answering, Some(turn_id))
    }

    /// A message's answer was sent.
    pub fn answered(&self, channel: &str, id: &str) -> Result<bool, Error> {
        self.advance(channel, id, State::Answering, State::Answered, None)
    }

    /// How many of `channel`'s messages are in each state.
    pub fn counts(&self, channel: &str) -> Result<Counts, Error> {
        let mut q = self.db.prepare("SELECT state, COUNT(*) FROM messages WHERE channel = ?1 GROUP BY state")?;
        let mut counts = Counts::default();
        for row in q.query_map([channel], |r| Ok((State::parse(&r.get::<_, String>(0)?)?, r.get::<_, u64>(1)?)))? {
            let (state, n) = row?;
            *match state {
                State::Received => &mut counts.received,
                State::Dropped => &mut counts.dropped,
                State::Answering => &mut counts.answering,
                State::Answered => &mut counts.answered,
            } = n;
        }
        Ok(counts)
    }

    /// The agent's session for `chat` of `channel`, once its first turn made one.
    pub fn session(&self, channel: &str, chat: &str) -> Result<Option<String>, Error> {
        let q = "SELECT session_id FROM sessions WHERE channel = ?1 AND chat = ?2";
        Ok(self.db.query_row(q, [channel, chat], |r| r.get(0)).optional()?)
    }

    /// Keeps `session_id` as `chat`'s session.
    pub fn set_session(&self, channel: &str, chat: &str, session_id: &str) -> Result<(), Error> {
        self.db.execute(
            "INSERT INTO sessions (channel, chat, session_id) VALUES (?1, ?2, ?3)
             ON CONFLICT (channel, chat) DO UPDATE SET session_id = excluded.session_id",
            params![channel, chat, session_id],
        )?;
        Ok(())
    }

    /// Notes webhook `id` as seen at `now_s` (Unix seconds); `false` when
    /// it was seen before, a replay. IDs older than `window_s` are
    /// forgotten: a message that old is refused by its timestamp anyway.
    pub fn first_sight(&self, channel: &str, id: &str, now_s: i64, window_s: i64) -> Result<bool, Error> {
        self.db
            .execute("DELETE FROM webhook_ids WHERE channel = ?1 AND at_s < ?2", params![channel, now_s - window_s])?;
        let inserted = self.db.execute(
            "INSERT INTO webhook_ids (channel, id, at_s) VALUES (?1, ?2, ?3) ON CONFLICT (channel, id) DO NOTHING",
            params![channel, id, now_s],
        )?;
        Ok(inserted == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::{Inbound, State, Store};

    fn message(id: u32, sender: &str) -> Inbound {
        Inbound { id: id.to_string(), chat: "42".into(), sender: sender.into(), text: format!("message {id}") }
    }

    #[test]
    fn a_poll_brought_again_keeps_each_message_once_and_the_cursor_moves_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("channels.db")).unwrap();
        assert_eq!(store.cursor("tg").unwrap(), None);
        assert_eq!(store.record_poll("tg", &[message(7, "u1"), message(8, "u1")], Some("9")).unwrap(), 2);
        // A crash before the cursor reached the service: the poll brings them again, and one more.
        let again = [message(7, "u1"), message(8, "u1"), message(9, "u2")];
        assert_eq!(store.record_poll("tg", &again, Some("10")).unwrap(), 1);
        assert_eq!(store.cursor("tg").unwrap().as_deref(), Some("10"));
        let pending = store.pending("tg").unwrap();
        let ids: Vec<&str> = pending.iter().map(|p| p.message.id.as_str()).collect();
        assert_eq!(ids, ["7", "8", "9"], "in the order they came");
        // Another channel's IDs are its own.
        assert_eq!(store.record_poll("hook", &[message(7, "u1")], None).unwrap(), 1);
    }

    #[test]
    fn what_was_written_is_there_after_reopening_and_states_only_move_forward() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("channels.db");
        {
            let mut store = Store::open(&path).unwrap();
            store.record_poll("tg", &[message(1, "u1"), message(2, "stranger"), message(3, "u1")], Some("4")).unwrap();
            assert!(store.drop_message("tg", "2").unwrap());
            assert!(store.start_answer("tg", "1", "t-1").unwrap());
            assert!(store.answered("tg", "1").unwrap());
            assert!(store.start_answer("tg", "3", "t-3").unwrap());
            store.set_session("tg", "42", "s-1").unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.cursor("tg").unwrap().as_deref(), Some("4"));
        let pending = store.pending("tg").unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!((pending[0].message.id.as_str(), pending[0].state), ("3", State::Answering));
        assert_eq!(pending[0].turn_id.as_deref(), Some("t-3"));
        assert_eq!(store.session("tg", "42").unwrap().as_deref(), Some("s-1"));
        // Nothing moves back or skips a state.
        assert!(!store.start_answer("tg", "1", "t-again").unwrap(), "an answered message starts no turn");
        assert!(!store.drop_message("tg", "3").unwrap());
        assert!(!store.answered("tg", "2").unwrap(), "a dropped message is never answered");
        let counts = store.counts("tg").unwrap();
        assert_eq!((counts.received, counts.dropped, counts.answering, counts.answered), (0, 1, 1, 1));
    }

    #[test]
    fn a_webhook_id_is_taken_once_within_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("channels.db")).unwrap();
        assert!(store.first_sight("hook", "msg_1", 1000, 300).unwrap());
        assert!(!store.first_sight("hook", "msg_1", 1100, 300).unwrap(), "a replay");
        assert!(store.first_sight("other", "msg_1", 1100, 300).unwrap(), "per channel");
        // Past the window it is forgotten (its timestamp refuses it by then).
        assert!(store.first_sight("hook", "msg_1", 1401, 300).unwrap());
    }
}
