//! The built-in tools (`specs/agent/README.md`, "Tools"): the agent's own
//! files (paths relative to its directory, RULE-001), its memory (store,
//! recall, forget), a user workspace's memory search, its jobs (its
//! `cron/jobs.toml`, `specs/scheduler/README.md`) and its goals
//! (`specs/clawfs/README.md`, "Goals"), each through fs-engine as the
//! agent; and `notify`, a notification raised at the scheduler.
//!
//! Owns: the built-in tools as one enum ([`BuiltIn`]): each one's name,
//! description and the permission a call needs, its arguments (one type
//! each, whose JSON Schema the model is told, derived by schemars), and the
//! fs-engine request a call makes. Must not own: deciding a call
//! (security-agent's `check_policy`) or recording it (`tools`), or what the
//! agent may reach (RULE-001 and the memory's rules are fs-engine's).

use clawos_api::fs_engine::{
    self, FilePath, GoalCreate, GoalQuery, GoalState, GoalUpdate, MemoryId, MemoryRecall, MemorySearch, MemoryStore,
    ReadFile, WriteFile,
};
use clawos_api::scheduler::{self, NewNotification};
use clawos_api::security_agent::Permission;
use clawos_ipc::{ComponentId, ErrorCode, IpcClient};
use clawos_schedule::jobs;
use jiff::tz::TimeZone;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{json, Value};

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltIn {
    /// `file_read`: a text file of the agent's.
    FileRead,
    /// `file_write`: writes (replaces) a text file of the agent's, making
    /// its directories.
    FileWrite,
    /// `file_list`: a directory of the agent's, its own by default.
    FileList,
    /// `memory_store`: a memory entry for later sessions, stored once per
    /// action ID.
    MemoryStore,
    /// `memory_recall`: the agent's memories (and files) about a query.
    MemoryRecall,
    /// `memory_forget`: removes a memory entry by its id.
    MemoryForget,
    /// `memory_search`: passages about a query in the user workspace of
    /// `[tools] memory_workspace`.
    MemorySearch,
    /// `schedule_add`: a job in the agent's `cron/jobs.toml`.
    ScheduleAdd,
    /// `schedule_list`: the jobs of the agent's `cron/jobs.toml`.
    ScheduleList,
    /// `schedule_remove`: a job out of the agent's `cron/jobs.toml`.
    ScheduleRemove,
    /// `notify`: a notification to the operator.
    Notify,
    /// `goal_create`: a goal in the agent's `goals/`.
    GoalCreate,
    /// `goal_update`: a goal's state, a log line, an artifact.
    GoalUpdate,
    /// `goal_list`: the agent's goals.
    GoalList,
}

impl BuiltIn {
    /// Every built-in tool, in the order the model is told of them.
    pub const ALL: [BuiltIn; 14] = [
        BuiltIn::FileRead,
        BuiltIn::FileWrite,
        BuiltIn::FileList,
        BuiltIn::MemoryStore,
        BuiltIn::MemoryRecall,
        BuiltIn::MemoryForget,
        BuiltIn::MemorySearch,
        BuiltIn::ScheduleAdd,
        BuiltIn::ScheduleList,
        BuiltIn::ScheduleRemove,
        BuiltIn::Notify,
        BuiltIn::GoalCreate,
        BuiltIn::GoalUpdate,
        BuiltIn::GoalList,
    ];

    /// Its tool name.
    pub const fn name(self) -> &'static str {
        match self {
            BuiltIn::FileRead => "file_read",
            BuiltIn::FileWrite => "file_write",
            BuiltIn::FileList => "file_list",
            BuiltIn::MemoryStore => "memory_store",
            BuiltIn::MemoryRecall => "memory_recall",
            BuiltIn::MemoryForget => "memory_forget",
            BuiltIn::MemorySearch => "memory_search",
            BuiltIn::ScheduleAdd => "schedule_add",
            BuiltIn::ScheduleList => "schedule_list",
            BuiltIn::ScheduleRemove => "schedule_remove",
            BuiltIn::Notify => "notify",
            BuiltIn::GoalCreate => "goal_create",
            BuiltIn::GoalUpdate => "goal_update",
            BuiltIn::GoalList => "goal_list",
        }
    }

    /// The built-in tool named `name`, if there is one.
    pub fn named(name: &str) -> Option<BuiltIn> {
        BuiltIn::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// What the model is told it does.
    pub const fn description(self) -> &'static str {
        match self {
            BuiltIn::FileRead => "Read a text file of yours.",
            BuiltIn::FileWrite => "Write (replace) a text file of yours.",
            BuiltIn::FileList => "List a directory of yours.",
            BuiltIn::MemoryStore => {
                "Remember something for later sessions. category: core (lasting facts, the default), daily (what happened today) or a name of your own."
            }
            BuiltIn::MemoryRecall => "Recall what you remembered (and your files say) about a query.",
            BuiltIn::MemoryForget => "Forget a memory by its id.",
            BuiltIn::MemorySearch => "Search memory for passages about a query.",
            BuiltIn::ScheduleAdd => "Schedule your prompt for later: one of cron (with tz), at, every (15m) or delay (10m).",
            BuiltIn::ScheduleList => "List your scheduled jobs.",
            BuiltIn::ScheduleRemove => "Remove a scheduled job.",
            BuiltIn::Notify => "Notify the operator (level: info, warning or error).",
            BuiltIn::GoalCreate => "Start a goal (state: proposed or active; parent: a goal it is part of).",
            BuiltIn::GoalUpdate => {
                "Change a goal: state (active, blocked, completed, abandoned), a note, an artifact file."
            }
            BuiltIn::GoalList => "List your goals.",
        }
    }

    /// What a call of it needs (`check_policy`).
    pub const fn needs(self) -> Permission {
        match self {
            BuiltIn::FileWrite | BuiltIn::GoalCreate | BuiltIn::GoalUpdate => Permission::FileWrite,
            BuiltIn::MemoryStore | BuiltIn::MemoryForget => Permission::MemoryWrite,
            BuiltIn::ScheduleAdd | BuiltIn::ScheduleRemove => Permission::Schedule,
            // Telling the operator changes nothing of the agent's: even a
            // read-only agent may ask for attention.
            BuiltIn::FileRead
            | BuiltIn::FileList
            | BuiltIn::MemoryRecall
            | BuiltIn::MemorySearch
            | BuiltIn::ScheduleList
            | BuiltIn::GoalList
            | BuiltIn::Notify => Permission::Read,
        }
    }

    /// The JSON Schema of its arguments, derived from their type.
    pub fn parameters(self) -> Value {
        match self {
            BuiltIn::FileRead => schema_of::<FileReadArgs>(),
            BuiltIn::FileWrite => schema_of::<FileWriteArgs>(),
            BuiltIn::FileList => schema_of::<FileListArgs>(),
            BuiltIn::MemoryStore => schema_of::<MemoryStoreArgs>(),
            BuiltIn::MemoryRecall => schema_of::<MemoryRecallArgs>(),
            BuiltIn::MemoryForget => schema_of::<MemoryForgetArgs>(),
            BuiltIn::MemorySearch => schema_of::<MemorySearchArgs>(),
            BuiltIn::ScheduleAdd => schema_of::<ScheduleAddArgs>(),
            // Providers want `properties` even when there are none.
            BuiltIn::ScheduleList => json!({"type": "object", "properties": {}}),
            BuiltIn::ScheduleRemove => schema_of::<ScheduleRemoveArgs>(),
            BuiltIn::Notify => schema_of::<NotifyArgs>(),
            BuiltIn::GoalCreate => schema_of::<GoalCreateArgs>(),
            BuiltIn::GoalUpdate => schema_of::<GoalUpdateArgs>(),
            BuiltIn::GoalList => json!({"type": "object", "properties": {}}),
        }
    }

    /// Makes a call of it with the model's `arguments` through fs-engine,
    /// as `agent`. `action_id` is the call's idempotency key where fs-engine
    /// takes one (`memory_store`); `memory_workspace` is the user workspace
    /// `memory_search` searches.
    pub(crate) async fn call(
        self,
        fs: &IpcClient,
        agent: &str,
        arguments: &Value,
        memory_workspace: &str,
        action_id: &str,
    ) -> Result<Value, CallError> {
        let fs = fs_engine::Client::new(fs);
        let as_agent = Some(agent.to_owned());
        match self {
            BuiltIn::FileRead => {
                let FileReadArgs { path } = FileReadArgs::read(arguments)?;
                let file = fs.read_file(&ReadFile { path, offset: 0, length: None, agent: as_agent }).await?;
                Ok(Value::String(file.content.unwrap_or_else(|| "(binary file)".into())))
            }
            BuiltIn::FileWrite => {
                let FileWriteArgs { path, content } = FileWriteArgs::read(arguments)?;
                let params = WriteFile {
                    path,
                    agent: as_agent,
                    content: Some(content),
                    create_dirs: true,
                    ..WriteFile::default()
                };
                let written = fs.write_file(&params).await?;
                Ok(json!({"path": written.path, "bytes_written": written.bytes_written}))
            }
            BuiltIn::FileList => {
                let FileListArgs { path } = FileListArgs::read(arguments)?;
                let path = path.unwrap_or_else(|| ".".to_owned());
                let listing = fs.list_dir(&FilePath { path, agent: as_agent }).await?;
                Ok(json!(listing.entries.iter().map(|entry| entry.name.clone()).collect::<Vec<_>>()))
            }
            BuiltIn::MemoryStore => {
                let MemoryStoreArgs { content, category } = MemoryStoreArgs::read(arguments)?;
                // Once per action: a store asked for again after a crash finds its entry.
                let params =
                    MemoryStore { agent: agent.into(), content, category, idempotency_key: Some(action_id.into()) };
                let entry = fs.memory_store(&params).await?;
                Ok(json!({"id": entry.id, "category": entry.category, "path": entry.path}))
            }
            BuiltIn::MemoryRecall => {
                let MemoryRecallArgs { query, category, limit } = MemoryRecallArgs::read(arguments)?;
                let params = MemoryRecall { agent: agent.into(), query, category, limit: Some(hits(limit)) };
                let recall = fs.memory_recall(&params).await?;
                Ok(json!(recall
                    .results
                    .iter()
                    .map(|hit| json!({"id": hit.id, "path": hit.path, "content": hit.content, "score": hit.score}))
                    .collect::<Vec<_>>()))
            }
            BuiltIn::MemoryForget => {
                let MemoryForgetArgs { id } = MemoryForgetArgs::read(arguments)?;
                let entry = fs.memory_forget(&MemoryId { agent: agent.into(), id }).await?;
                Ok(json!({"forgot": entry.id, "path": entry.path}))
            }
            BuiltIn::MemorySearch => {
                let MemorySearchArgs { query, limit } = MemorySearchArgs::read(arguments)?;
                let params =
                    MemorySearch { workspace: memory_workspace.into(), query, limit: Some(hits(limit)), fusion: None };
                let found = fs.memory_search(&params).await?;
                Ok(json!(found
                    .results
                    .iter()
                    .map(|hit| json!({"path": hit.path, "content": hit.content, "score": hit.score}))
                    .collect::<Vec<_>>()))
            }
            BuiltIn::ScheduleAdd => {
                let args = ScheduleAddArgs::read(arguments)?;
                let mut fields = vec![("prompt", args.prompt.as_str())];
                for (key, value) in [
                    ("cron", &args.cron),
                    ("at", &args.at),
                    ("every", &args.every),
                    ("delay", &args.delay),
                    ("tz", &args.tz),
                ] {
                    if let Some(value) = value {
                        fields.push((key, value));
                    }
                }
                let text = jobs_file(&fs, agent).await?;
                let text =
                    jobs::with_job_added(&text, &args.name, &fields, &local_zone()).map_err(CallError::Refused)?;
                write_jobs_file(&fs, agent, text).await?;
                Ok(json!({"added": args.name}))
            }
            BuiltIn::ScheduleList => {
                let text = jobs_file(&fs, agent).await?;
                let found = jobs::parse(&text, &local_zone()).map_err(|e| CallError::Refused(e.to_string()))?;
                Ok(json!(found
                    .iter()
                    .map(|job| json!({"name": job.name, "schedule": job.schedule.to_string(), "prompt": job.prompt}))
                    .collect::<Vec<_>>()))
            }
            BuiltIn::ScheduleRemove => {
                let ScheduleRemoveArgs { name } = ScheduleRemoveArgs::read(arguments)?;
                let text = jobs_file(&fs, agent).await?;
                let text = jobs::with_job_removed(&text, &name, &local_zone()).map_err(CallError::Refused)?;
                write_jobs_file(&fs, agent, text).await?;
                Ok(json!({"removed": name}))
            }
            BuiltIn::Notify => {
                let NotifyArgs { title, body, level } = NotifyArgs::read(arguments)?;
                let params = NewNotification { agent: agent.into(), title, body: body.unwrap_or_default(), level };
                let client =
                    super::connect(ComponentId::Scheduler).await.map_err(|e| CallError::Unreachable(e.to_string()))?;
                let raised = scheduler::Client::new(&client).notify(&params).await;
                client.goodbye().await;
                let raised = raised.map_err(CallError::Scheduler)?;
                Ok(json!({"notification": raised.id}))
            }
            BuiltIn::GoalCreate => {
                let GoalCreateArgs { title, description, parent, state } = GoalCreateArgs::read(arguments)?;
                let state = state.map(|s| goal_state(&s)).transpose()?;
                let params = GoalCreate {
                    agent: agent.into(),
                    title,
                    description: description.unwrap_or_default(),
                    id: None,
                    parent,
                    state,
                };
                let goal = fs.goal_create(&params).await?;
                Ok(json!({"id": goal.id, "state": goal.state, "path": goal.path}))
            }
            BuiltIn::GoalUpdate => {
                let GoalUpdateArgs { id, state, note, artifact } = GoalUpdateArgs::read(arguments)?;
                let state = state.map(|s| goal_state(&s)).transpose()?;
                let goal = fs.goal_update(&GoalUpdate { agent: agent.into(), id, state, note, artifact }).await?;
                Ok(json!({"id": goal.id, "state": goal.state, "path": goal.path}))
            }
            BuiltIn::GoalList => {
                let goals = fs.goal_list(&GoalQuery { agent: agent.into(), state: None }).await?;
                Ok(json!(goals
                    .goals
                    .iter()
                    .map(
                        |g| json!({"id": g.id, "title": g.title, "state": g.state, "parent": g.parent, "path": g.path})
                    )
                    .collect::<Vec<_>>()))
            }
        }
    }
}

/// A goal state the model named.
fn goal_state(name: &str) -> Result<GoalState, CallError> {
    serde_json::from_value(Value::String(name.to_owned())).map_err(|_| {
        CallError::Refused(format!("`{name}` is not a goal state: proposed, active, blocked, completed or abandoned"))
    })
}

/// The zone of jobs that name none: the box's.
fn local_zone() -> TimeZone {
    TimeZone::try_system().unwrap_or(TimeZone::UTC)
}

/// The agent's jobs file as text (empty when it has none).
async fn jobs_file(fs: &fs_engine::Client<'_>, agent: &str) -> Result<String, CallError> {
    let params = ReadFile { path: jobs::JOBS_FILE.into(), offset: 0, length: None, agent: Some(agent.into()) };
    match fs.read_file(&params).await {
        Ok(file) => Ok(file.content.unwrap_or_default()),
        Err(clawos_api::CallError::Ipc(e)) if e.code() == ErrorCode::Enoent => Ok(String::new()),
        Err(e) => Err(e.into()),
    }
}

async fn write_jobs_file(fs: &fs_engine::Client<'_>, agent: &str, text: String) -> Result<(), CallError> {
    let params = WriteFile {
        path: jobs::JOBS_FILE.into(),
        agent: Some(agent.into()),
        content: Some(text),
        create_dirs: true,
        ..WriteFile::default()
    };
    fs.write_file(&params).await?;
    Ok(())
}

/// Why a built-in call failed: what the model reads after `error: `, and
/// the error its tool-call record keeps.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A required argument is missing or not a string.
    #[error("`{key}` (a string) is required")]
    MissingArgument {
        /// The argument.
        key: &'static str,
    },
    /// fs-engine refused or failed (RULE-001, a missing file, ...).
    #[error(transparent)]
    FsEngine(#[from] clawos_api::CallError),
    /// The change would not make a valid jobs file, or the file has an
    /// error: the scheduler's parser says why.
    #[error("{0}")]
    Refused(String),
    /// The scheduler could not be reached.
    #[error("{0}")]
    Unreachable(String),
    /// The scheduler refused or failed.
    #[error("{0}")]
    Scheduler(clawos_api::CallError),
}

/// How many hits a recall or a search answers: the model's `limit` within
/// 1 to 20, 5 without one.
fn hits(limit: Option<u64>) -> usize {
    limit.map_or(5, |n| n.clamp(1, 20) as usize)
}

/// The JSON Schema of `T` as the model is told it: the object's
/// properties and which are required. The meta-schema, the root's `title`
/// (the Rust type's name) and its description (the type's doc comment,
/// written for readers of this file) are not the model's: the tool's
/// description goes beside the schema.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|settings| settings.meta_schema = None);
    let mut schema = settings.into_generator().into_root_schema_for::<T>();
    schema.remove("title");
    schema.remove("description");
    schema.to_value()
}

/// An optional argument is told by its bare JSON type and left out of
/// `required`, as the tools were always described: schemars makes an
/// `Option` nullable (a model told it may send `null` sends it) and gives
/// a `u64` its Rust format and minimum.
pub(crate) fn optional(schema: &mut Schema) {
    if let Some(Value::Array(types)) = schema.get("type") {
        if let [bare] = types.iter().filter(|kind| *kind != "null").collect::<Vec<_>>()[..] {
            let bare = bare.clone();
            schema.insert("type".into(), bare);
        }
    }
    schema.remove("format");
    schema.remove("minimum");
}

/// What a path argument is relative to.
const RELATIVE_PATH: &str = "relative to your directory";

/// A built-in tool's arguments, read from what the model sent as they
/// always were: a required string must be there (else the call fails
/// naming it), and an optional argument of another type counts as left
/// out. Field doc comments would be descriptions the model reads: the
/// fields have none, only the `description`s the tools always had.
trait Arguments: JsonSchema + Sized {
    /// Reads them from the call's `arguments`.
    fn read(arguments: &Value) -> Result<Self, CallError>;
}

/// A required string argument.
fn required(arguments: &Value, key: &'static str) -> Result<String, CallError> {
    arguments.get(key).and_then(Value::as_str).map(str::to_owned).ok_or(CallError::MissingArgument { key })
}

/// An optional string argument.
fn text(arguments: &Value, key: &str) -> Option<String> {
    arguments.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// An optional count argument.
fn count(arguments: &Value, key: &str) -> Option<u64> {
    arguments.get(key).and_then(Value::as_u64)
}

/// `file_read`'s arguments.
#[derive(JsonSchema)]
struct FileReadArgs {
    #[schemars(description = RELATIVE_PATH)]
    path: String,
}

impl Arguments for FileReadArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(FileReadArgs { path: required(arguments, "path")? })
    }
}

/// `file_write`'s arguments.
#[derive(JsonSchema)]
struct FileWriteArgs {
    #[schemars(description = RELATIVE_PATH)]
    path: String,
    content: String,
}

impl Arguments for FileWriteArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(FileWriteArgs { path: required(arguments, "path")?, content: required(arguments, "content")? })
    }
}

/// `file_list`'s arguments: without a path, the agent's directory.
#[derive(JsonSchema)]
struct FileListArgs {
    #[schemars(description = RELATIVE_PATH, transform = optional)]
    path: Option<String>,
}

impl Arguments for FileListArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(FileListArgs { path: text(arguments, "path") })
    }
}

/// `memory_store`'s arguments.
#[derive(JsonSchema)]
struct MemoryStoreArgs {
    content: String,
    #[schemars(transform = optional)]
    category: Option<String>,
}

impl Arguments for MemoryStoreArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        let category = text(arguments, "category");
        Ok(MemoryStoreArgs { content: required(arguments, "content")?, category })
    }
}

/// `memory_recall`'s arguments.
#[derive(JsonSchema)]
struct MemoryRecallArgs {
    query: String,
    #[schemars(transform = optional)]
    category: Option<String>,
    #[schemars(transform = optional)]
    limit: Option<u64>,
}

impl Arguments for MemoryRecallArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        let (category, limit) = (text(arguments, "category"), count(arguments, "limit"));
        Ok(MemoryRecallArgs { query: required(arguments, "query")?, category, limit })
    }
}

/// `memory_forget`'s arguments.
#[derive(JsonSchema)]
struct MemoryForgetArgs {
    id: String,
}

impl Arguments for MemoryForgetArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(MemoryForgetArgs { id: required(arguments, "id")? })
    }
}

/// `memory_search`'s arguments.
#[derive(JsonSchema)]
struct MemorySearchArgs {
    query: String,
    #[schemars(transform = optional)]
    limit: Option<u64>,
}

impl Arguments for MemorySearchArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        let limit = count(arguments, "limit");
        Ok(MemorySearchArgs { query: required(arguments, "query")?, limit })
    }
}

/// `schedule_add`'s arguments: the names and spelling of `cron/jobs.toml`.
#[derive(JsonSchema)]
struct ScheduleAddArgs {
    name: String,
    prompt: String,
    #[schemars(transform = optional)]
    cron: Option<String>,
    #[schemars(transform = optional)]
    at: Option<String>,
    #[schemars(transform = optional)]
    every: Option<String>,
    #[schemars(transform = optional)]
    delay: Option<String>,
    #[schemars(transform = optional)]
    tz: Option<String>,
}

impl Arguments for ScheduleAddArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(ScheduleAddArgs {
            name: required(arguments, "name")?,
            prompt: required(arguments, "prompt")?,
            cron: text(arguments, "cron"),
            at: text(arguments, "at"),
            every: text(arguments, "every"),
            delay: text(arguments, "delay"),
            tz: text(arguments, "tz"),
        })
    }
}

/// `schedule_remove`'s arguments.
#[derive(JsonSchema)]
struct ScheduleRemoveArgs {
    name: String,
}

impl Arguments for ScheduleRemoveArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(ScheduleRemoveArgs { name: required(arguments, "name")? })
    }
}

/// `notify`'s arguments.
#[derive(JsonSchema)]
struct NotifyArgs {
    title: String,
    #[schemars(transform = optional)]
    body: Option<String>,
    #[schemars(transform = optional)]
    level: Option<String>,
}

impl Arguments for NotifyArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(NotifyArgs {
            title: required(arguments, "title")?,
            body: text(arguments, "body"),
            level: text(arguments, "level"),
        })
    }
}

/// `goal_create`'s arguments.
#[derive(JsonSchema)]
struct GoalCreateArgs {
    title: String,
    #[schemars(transform = optional)]
    description: Option<String>,
    #[schemars(transform = optional)]
    parent: Option<String>,
    #[schemars(transform = optional)]
    state: Option<String>,
}

impl Arguments for GoalCreateArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(GoalCreateArgs {
            title: required(arguments, "title")?,
            description: text(arguments, "description"),
            parent: text(arguments, "parent"),
            state: text(arguments, "state"),
        })
    }
}

/// `goal_update`'s arguments.
#[derive(JsonSchema)]
struct GoalUpdateArgs {
    id: String,
    #[schemars(transform = optional)]
    state: Option<String>,
    #[schemars(transform = optional)]
    note: Option<String>,
    #[schemars(transform = optional)]
    artifact: Option<String>,
}

impl Arguments for GoalUpdateArgs {
    fn read(arguments: &Value) -> Result<Self, CallError> {
        Ok(GoalUpdateArgs {
            id: required(arguments, "id")?,
            state: text(arguments, "state"),
            note: text(arguments, "note"),
            artifact: text(arguments, "artifact"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_again() {
        for tool in BuiltIn::ALL {
            assert_eq!(BuiltIn::named(tool.name()), Some(tool));
        }
        assert_eq!(BuiltIn::named("text-stats"), None);
    }

    /// The schemas the model was told before they were derived, word for word.
    #[test]
    fn the_derived_schemas_are_the_ones_the_model_was_always_told() {
        let path = json!({"type": "string", "description": "relative to your directory"});
        let told = [
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
            json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}}, "required": ["path", "content"]}),
            json!({"type": "object", "properties": {"path": path}}),
            json!({"type": "object", "properties": {"content": {"type": "string"}, "category": {"type": "string"}}, "required": ["content"]}),
            json!({"type": "object", "properties": {"query": {"type": "string"}, "category": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}),
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
            json!({"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}),
            json!({"type": "object", "properties": {"name": {"type": "string"}, "prompt": {"type": "string"},
                "cron": {"type": "string"}, "at": {"type": "string"}, "every": {"type": "string"},
                "delay": {"type": "string"}, "tz": {"type": "string"}}, "required": ["name", "prompt"]}),
            json!({"type": "object", "properties": {}}),
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"},
                "level": {"type": "string"}}, "required": ["title"]}),
            json!({"type": "object", "properties": {"title": {"type": "string"}, "description": {"type": "string"},
                "parent": {"type": "string"}, "state": {"type": "string"}}, "required": ["title"]}),
            json!({"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"},
                "note": {"type": "string"}, "artifact": {"type": "string"}}, "required": ["id"]}),
            json!({"type": "object", "properties": {}}),
        ];
        for (tool, told) in BuiltIn::ALL.into_iter().zip(told) {
            assert_eq!(tool.parameters(), told, "{}", tool.name());
        }
    }

    #[test]
    fn arguments_are_read_leniently_and_a_missing_one_is_named() {
        let error = FileWriteArgs::read(&json!({"path": "a.md"})).err().unwrap();
        assert_eq!(error.to_string(), "`content` (a string) is required");
        let error = MemoryRecallArgs::read(&json!({"query": 3})).err().unwrap();
        assert_eq!(error.to_string(), "`query` (a string) is required");
        let args = MemoryRecallArgs::read(&json!({"query": "boats", "category": 1, "limit": "5"})).unwrap();
        assert_eq!((args.category, args.limit), (None, None));
        assert_eq!((hits(None), hits(Some(0)), hits(Some(99))), (5, 1, 20));
    }
}
