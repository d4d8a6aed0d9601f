//! Per-call memory limit: one budget for all memories and tables of a Store.

use wasmtime::ResourceLimiter;

use crate::error::Abort;

/// Bytes charged per table element: a funcref slot is one pointer.
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();
/// Instances, memories and tables one call may create. A Rust wasip2
/// component has a handful of core instances (its module plus the canonical
/// ABI shims); anything beyond these counts is a tool trying to fork itself.
pub(crate) const MAX_INSTANCES_PER_CALL: usize = 16;
pub(crate) const MAX_MEMORIES_PER_CALL: usize = 4;
pub(crate) const MAX_TABLES_PER_CALL: usize = 8;

/// Counts the bytes of every linear memory and table in the Store together,
/// so a tool cannot get past its limit by spreading over several memories.
pub(crate) struct CallLimiter {
    limit_bytes: usize,
    used_bytes: usize,
}

impl CallLimiter {
    pub(crate) fn new(limit_bytes: usize) -> CallLimiter {
        CallLimiter { limit_bytes, used_bytes: 0 }
    }

    pub(crate) fn remaining_bytes(&self) -> usize {
        self.limit_bytes.saturating_sub(self.used_bytes)
    }

    fn grow(&mut self, current: usize, desired: usize) -> wasmtime::Result<bool> {
        let requested_bytes = self.used_bytes.saturating_sub(current).saturating_add(desired);
        if requested_bytes > self.limit_bytes {
            // An error (not `Ok(false)`) traps at once with a typed cause, instead
            // of letting the guest see -1 from memory.grow and abort with a
            // generic `unreachable`.
            return Err(wasmtime::Error::new(Abort::Memory { requested_bytes, limit_bytes: self.limit_bytes }));
        }
        self.used_bytes = requested_bytes;
        Ok(true)
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.grow(current, desired)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.grow(current.saturating_mul(TABLE_ELEMENT_BYTES), desired.saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES_PER_CALL
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_CALL
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_CALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut limiter = CallLimiter::new(1000);
        assert!(limiter.memory_growing(0, 600, None).unwrap());
        // 50 table elements = 400 bytes: 1000 in all, still inside.
        assert!(limiter.table_growing(0, 50, None).unwrap());
        let err = limiter.memory_growing(600, 601, None).unwrap_err();
        assert!(matches!(
            err.downcast_ref::<Abort>(),
            Some(Abort::Memory { requested_bytes: 1001, limit_bytes: 1000 })
        ));
    }
}
