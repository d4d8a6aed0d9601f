//! Workspace memory search for tools granted `memory:search:<workspace>`,
//! answered by fs-engine's `memory_search` (hybrid keyword + vector search;
//! specs/clawfs/README.md). The host has checked the grant; fs-engine owns
//! the workspaces, so the daemon never opens their databases itself.

use std::time::Duration;

use clawos_api::fs_engine::{self, MemorySearch as SearchParams};
use clawos_ipc::ComponentId;
use clawos_toolhost::{MemoryError, MemoryResults, MemorySearch};

/// How long one search may take.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(5);

pub struct FsEngineMemory {
    runtime: tokio::runtime::Handle,
}

impl FsEngineMemory {
    pub fn new(runtime: tokio::runtime::Handle) -> FsEngineMemory {
        FsEngineMemory { runtime }
    }
}

impl MemorySearch for FsEngineMemory {
    fn search(&self, workspace: &str, query: &str, limit: u32) -> Result<MemoryResults, MemoryError> {
        let params = SearchParams {
            workspace: workspace.to_owned(),
            query: query.to_owned(),
            limit: Some(limit as usize),
            fusion: None,
        };
        let answer = clawos_runtime::peers::call(
            &self.runtime,
            ComponentId::WasmDaemon,
            ComponentId::FsEngine,
            async |client| fs_engine::Client::new(client).with_timeout(SEARCH_TIMEOUT).memory_search(&params).await,
        )
        .map_err(MemoryError::Failed)?;
        Ok(MemoryResults::from(answer))
    }
}
