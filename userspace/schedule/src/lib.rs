//! The scheduler's rules (`specs/scheduler/README.md`): an agent's jobs
//! file (`jobs`), when a job is due (`slots`), and the database of jobs and
//! runs that makes each slot fire once (`store`). The daemon
//! (`clawos-scheduler`) reads the files, asks these and starts the turns;
//! `clawctl schedule add` checks a file with the same parser.
//!
//! Owns: the jobs file's format, the slot and missed-run rules, the fire
//! ID. Must not own: the turn a run starts (agent-loop), an agent's
//! directory layout beyond `cron/jobs.toml` (fs-engine), anything IPC.
#![deny(missing_docs)]

pub mod jobs;
pub mod slots;
pub mod store;
