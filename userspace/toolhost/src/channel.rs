//! Channel components (specs/channels/README.md): the `clawos:channel`
//! world (`specs/wit/channel/channel.wit`), a channel's protocol as pure
//! functions, run with the tool host's engine and its limits: a fresh
//! Store for every call, its memory capped, a wall-clock deadline by epoch,
//! WASI's deny-by-default context (no preopens, no sockets, no
//! environment), and no host function of ClawOS at all. A component that
//! imports anything but WASI and the interface's own types is refused when
//! it is loaded.
//!
//! Owns: loading a channel component and calling its four functions. Must
//! not own: the requests it asks for, the store, the loop (the host's
//! runner, `clawos-channels`).

use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::Store;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::host::{classify, ToolHost, EPOCH_TICK};
use crate::limits::CallLimiter;
use crate::CallError;

mod bindings {
    wasmtime::component::bindgen!({ path: "../../specs/wit/channel", world: "channel" });
}

pub use bindings::clawos::channel::types::{Batch, ChannelError, Header, Inbound, Request, Response};

/// The Store data of one call of a channel's function.
struct ChannelState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: CallLimiter,
}

impl WasiView for ChannelState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A loaded channel component.
pub struct Channel {
    id: String,
    engine: wasmtime::Engine,
    pre: bindings::ChannelPre<ChannelState>,
    memory_bytes: usize,
    timeout: Duration,
}

impl ToolHost {
    /// Compiles and links the channel component `wasm` as `id`, each call
    /// of it limited to `memory_limit_mb` and `timeout`.
    pub fn load_channel(
        &self,
        id: &str,
        wasm: &[u8],
        memory_limit_mb: u32,
        timeout: Duration,
    ) -> Result<Channel, CallError> {
        let load = |what: &'static str| {
            move |e: wasmtime::Error| CallError::Load { tool_id: id.to_owned(), what, message: format!("{e:#}") }
        };
        let engine = self.engine().clone();
        let component = Component::new(&engine, wasm).map_err(load("component"))?;
        for (name, _) in component.component_type().imports(&engine) {
            // The interface's own types come as an import with no functions.
            let types = name.split('@').next() == Some("clawos:channel/types");
            if !types && !name.starts_with("wasi:") {
                return Err(CallError::CapabilityDenied {
                    tool_id: id.to_owned(),
                    reason: format!("a channel imports no host interface, and this one imports {name}"),
                });
            }
        }
        let mut linker = Linker::<ChannelState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(load("linker"))?;
        let pre = linker.instantiate_pre(&component).map_err(load("linker"))?;
        let pre = bindings::ChannelPre::new(pre).map_err(load("the channel world's exports"))?;
        Ok(Channel { id: id.to_owned(), engine, pre, memory_bytes: (memory_limit_mb as usize) << 20, timeout })
    }
}

impl Channel {
    /// Runs `f` on a fresh instance, within the limits.
    fn call<R>(
        &self,
        f: impl FnOnce(&bindings::Channel, &mut Store<ChannelState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let state = ChannelState {
            wasi: WasiCtx::builder().allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new(self.memory_bytes),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(self.timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()) as u64 + 1);
        store.epoch_deadline_trap();
        let started = Instant::now();
        let outcome = self.pre.instantiate(&mut store).and_then(|channel| f(&channel, &mut store));
        outcome.map_err(|e| classify(&self.id, self.timeout.max(started.elapsed()), e))
    }

    /// The request of the next poll from `cursor`.
    pub fn poll_request(&self, cursor: Option<&str>, timeout_seconds: u32) -> Result<Request, CallError> {
        self.call(|channel, store| channel.call_poll_request(store, cursor, timeout_seconds))
    }

    /// A poll's response, read.
    pub fn poll_response(&self, response: &Response) -> Result<Result<Batch, ChannelError>, CallError> {
        self.call(|channel, store| channel.call_poll_response(store, response))
    }

    /// The requests that send `text` to `chat`.
    pub fn send_requests(&self, chat: &str, text: &str) -> Result<Vec<Request>, CallError> {
        self.call(|channel, store| channel.call_send_requests(store, chat, text))
    }

    /// A send's response, read.
    pub fn send_response(&self, response: &Response) -> Result<Result<(), ChannelError>, CallError> {
        self.call(|channel, store| channel.call_send_response(store, response))
    }
}
