-- AgentFS v0.4 schema as used by ClawOS: userspace/agentfs runs this file
-- (and audit_triggers.sql beside it) as it is.
-- The spec tables and indexes are reproduced exactly; the ClawOS extension
-- tables (prefix clawos_) and the tool_calls triggers are additive, as the
-- spec's extension points allow. Every statement is idempotent so that the
-- same script can run on open of an existing workspace.

-- Tool call audit trail -------------------------------------------------------

CREATE TABLE IF NOT EXISTS tool_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  parameters TEXT,
  result TEXT,
  error TEXT,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_tool_calls_name ON tool_calls(name);
CREATE INDEX IF NOT EXISTS idx_tool_calls_started_at ON tool_calls(started_at);

-- Virtual filesystem ----------------------------------------------------------

CREATE TABLE IF NOT EXISTS fs_config (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS fs_inode (
  ino INTEGER PRIMARY KEY AUTOINCREMENT,
  mode INTEGER NOT NULL,
  nlink INTEGER NOT NULL DEFAULT 0,
  uid INTEGER NOT NULL DEFAULT 0,
  gid INTEGER NOT NULL DEFAULT 0,
  size INTEGER NOT NULL DEFAULT 0,
  atime INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL,
  rdev INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS fs_dentry (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  parent_ino INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  UNIQUE(parent_ino, name)
);
CREATE INDEX IF NOT EXISTS idx_fs_dentry_parent ON fs_dentry(parent_ino, name);

CREATE TABLE IF NOT EXISTS fs_data (
  ino INTEGER NOT NULL,
  chunk_index INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (ino, chunk_index)
);

CREATE TABLE IF NOT EXISTS fs_symlink (
  ino INTEGER PRIMARY KEY,
  target TEXT NOT NULL
);

-- Overlay ---------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS fs_whiteout (
  path TEXT PRIMARY KEY,
  parent_path TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_fs_whiteout_parent ON fs_whiteout(parent_path);

CREATE TABLE IF NOT EXISTS fs_origin (
  delta_ino INTEGER PRIMARY KEY,
  base_ino INTEGER NOT NULL
);

-- Key-value store -------------------------------------------------------------

CREATE TABLE IF NOT EXISTS kv_store (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  created_at INTEGER DEFAULT (unixepoch()),
  updated_at INTEGER DEFAULT (unixepoch())
);
CREATE INDEX IF NOT EXISTS idx_kv_store_created_at ON kv_store(created_at);

-- ClawOS extension: extended attributes (filesystem extension point) --------

CREATE TABLE IF NOT EXISTS clawos_xattr (
  ino INTEGER NOT NULL,
  name TEXT NOT NULL,
  value BLOB NOT NULL,
  PRIMARY KEY (ino, name)
);

-- ClawOS extension: tool call timing and grouping (tool call extension point)
-- tool_calls keeps whole seconds and duration_ms = (completed_at - started_at)
-- * 1000 as consistency rule 3 demands; the real millisecond timing lives here.

CREATE TABLE IF NOT EXISTS clawos_tool_call_meta (
  call_id INTEGER PRIMARY KEY,
  session_id TEXT,
  parent_call_id INTEGER,
  started_at_ms INTEGER NOT NULL,
  completed_at_ms INTEGER NOT NULL,
  CHECK (completed_at_ms >= started_at_ms)
);
CREATE INDEX IF NOT EXISTS idx_clawos_tool_call_meta_session
  ON clawos_tool_call_meta(session_id);

-- ClawOS extension: the idempotency key a call was made with (tool call
-- extension point). A caller that asks again with the same key after a crash
-- gets the recorded call instead of a second run (specs/agent/README.md,
-- "Checkpoints and resume"). Written in the same transaction as the call.

CREATE TABLE IF NOT EXISTS clawos_tool_call_key (
  idempotency_key TEXT PRIMARY KEY,
  call_id INTEGER NOT NULL UNIQUE
);

-- ClawOS extension: the tool calls' hash chain (tool call extension point).
-- One row per call ClawOS recorded, written in the same transaction: hash is
-- SHA-256 over the chain's previous hash and the call as recorded (its
-- tool_calls row, its clawos_tool_call_meta row and its idempotency key;
-- specs/agentfs/README.md, "The audit trail"). The checker recomputes it, so
-- a call changed or removed after it was recorded shows, even by a process
-- that bypassed every trigger.

CREATE TABLE IF NOT EXISTS clawos_tool_call_chain (
  call_id INTEGER PRIMARY KEY,
  hash BLOB NOT NULL
);

-- ClawOS extension: sub-second file times (filesystem extension point).
-- fs_inode keeps whole seconds; the nanoseconds live here with the seconds
-- they belong to, so a time another implementation rewrites reads back as
-- whole seconds instead of pairing its seconds with stale nanoseconds.
-- (No CHECK on the ranges: the reference SDK's engine refuses column
-- CHECKs; the consistency checker verifies them instead.)

CREATE TABLE IF NOT EXISTS clawos_inode_nsec (
  ino INTEGER PRIMARY KEY,
  atime INTEGER,
  atime_nsec INTEGER,
  mtime INTEGER,
  mtime_nsec INTEGER,
  ctime INTEGER,
  ctime_nsec INTEGER
);
