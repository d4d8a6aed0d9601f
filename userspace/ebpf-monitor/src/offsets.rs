//! The kernel struct offsets the programs need ([`KernelOffsets`]), read
//! from the running kernel's BTF. aya relocates nothing in Rust programs,
//! so without this the programs would carry one kernel's layout and read
//! the wrong fields on any other (between 6.12 and 6.18 alone, `f_inode`
//! and `f_flags` of `struct file` moved).

use std::path::Path;

use btf_rs::{Btf, Type};
use clawos_ebpf_common::KernelOffsets;

/// Where the kernel publishes its own BTF.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A field the programs need that the kernel's BTF does not describe.
#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    #[error("parsing BTF from {path}: {message}")]
    Parse { path: String, message: String },
    #[error("kernel BTF has no struct {0}")]
    NoStruct(&'static str),
    #[error("kernel BTF has no member {member} in struct {strukt}")]
    NoMember { strukt: &'static str, member: &'static str },
    #[error("{strukt}.{member} is a bitfield or not byte-aligned")]
    Unaligned { strukt: &'static str, member: &'static str },
}

/// Every offset of [`KernelOffsets`], from raw BTF (the contents of
/// [`KERNEL_BTF`]); `source` names where it came from, for errors.
pub fn from_btf_bytes(bytes: &[u8], source: &Path) -> Result<KernelOffsets, OffsetError> {
    let btf = Btf::from_bytes(bytes)
        .map_err(|err| OffsetError::Parse { path: source.display().to_string(), message: err.to_string() })?;
    resolve(&btf)
}

fn resolve(btf: &Btf) -> Result<KernelOffsets, OffsetError> {
    let mut offsets = KernelOffsets::default();
    for (strukt, member, slot) in offsets.fields_mut() {
        let members = btf
            .resolve_types_by_name(strukt)
            .unwrap_or_default()
            .into_iter()
            // A name can also be a forward declaration or a typedef.
            .find_map(|ty| match ty {
                Type::Struct(found) if !found.members.is_empty() => Some(found),
                _ => None,
            })
            .ok_or(OffsetError::NoStruct(strukt))?;
        let bits = member_bit_offset(btf, &members, member).ok_or(OffsetError::NoMember { strukt, member })?;
        if bits % 8 != 0 {
            return Err(OffsetError::Unaligned { strukt, member });
        }
        *slot = bits / 8;
    }
    Ok(offsets)
}

/// The bit offset of `name` in a struct or union with `members`, looking
/// inside anonymous struct and union members as C does (6.18's `struct
/// file` keeps `f_path` in an anonymous union).
fn member_bit_offset(btf: &Btf, members: &btf_rs::Struct, name: &str) -> Option<u32> {
    for member in &members.members {
        match btf.resolve_name(member) {
            Ok(found) if found == name => return Some(member.bit_offset()),
            Ok(found) if found.is_empty() => {
                let inner = match btf.resolve_chained_type(member).ok()? {
                    Type::Struct(inner) | Type::Union(inner) => inner,
                    _ => continue,
                };
                if let Some(bits) = member_bit_offset(btf, &inner, name) {
                    return Some(member.bit_offset() + bits);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs wherever the test host publishes its BTF (required by `make test`):
    /// every field must resolve, and the ones that sit at fixed places in
    /// every kernel this project can meet must land there. The VM test
    /// checks the values at work on the ClawOS kernel (pids, exit codes,
    /// open flags and paths in the events).
    #[test]
    fn the_running_kernels_offsets_resolve_to_plausible_places() {
        let path = Path::new(KERNEL_BTF);
        if !path.exists() {
            clawos_test_require::missing(
                "the_running_kernels_offsets_resolve_to_plausible_places",
                &format!("no {KERNEL_BTF}"),
            );
            return;
        }
        let offsets = from_btf_bytes(&std::fs::read(path).unwrap(), path).unwrap();
        // `tgid` follows `pid` (both pid_t) in every task_struct since 2.6.
        assert_eq!(offsets.task_tgid, offsets.task_pid + 4);
        // A struct path is two pointers; f_path is 8-byte aligned, after f_inode's pointer.
        assert_eq!(offsets.file_f_path % 8, 0);
        assert_eq!(offsets.file_f_inode % 8, 0);
        assert!(offsets.file_f_path > 0 && offsets.task_pid > 0 && offsets.binprm_filename > 0);
    }

    #[test]
    fn unparsable_btf_is_a_clear_error() {
        let err = from_btf_bytes(b"not BTF", Path::new("/some/btf")).unwrap_err();
        assert!(err.to_string().contains("/some/btf"), "{err}");
    }
}
