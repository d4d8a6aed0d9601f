//! What PCR 4 will hold when the box boots a new UKI (specs/update/README.md,
//! "The TPM across an update").
//!
//! The vault's master key and /clawfs's TPM2 keyslot are sealed to PCRs 4
//! and 12 (specs/vault/README.md, "PCR choice"). The firmware extends PCR 4
//! with the Authenticode digest of every boot application it starts:
//! systemd-boot, then the UKI systemd-boot loads. A new version is a new
//! UKI, so a new PCR 4, and nothing can be sealed to a value nobody has
//! computed. This module computes it from the one record of how PCR 4 got
//! its value on this box: the firmware's event log. It replays the log's
//! PCR 4 events, checks the replay against the TPM's PCR 4 (so the log is
//! complete and read right), and replays it again with the booted UKI's
//! digest (and its kernel's, if the firmware measured that too) replaced by
//! the new UKI's. Everything else measured on this box (systemd-boot, the
//! firmware's own events) stays as it is, so the prediction holds for this
//! box and only for it, as the seal it feeds.

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// The TPM's SHA-256 algorithm ID (TPM_ALG_SHA256).
const ALG_SHA256: u16 = 0x000B;
/// An event that is logged but not extended into any PCR.
const EV_NO_ACTION: u32 = 0x0000_0003;
/// TPM_CC_PolicyPCR, for the policy digests systemd-cryptenroll records.
const TPM_CC_POLICY_PCR: u32 = 0x0000_017F;

/// One extension of one PCR (SHA-256 bank) from the event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    pub pcr: u32,
    pub event_type: u32,
    pub sha256: [u8; 32],
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .context("the event log ends inside an event")?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }
    fn u16(&mut self) -> anyhow::Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into()?))
    }
    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
}

/// The SHA-256 extensions of a crypto-agile TCG event log (TCG PC Client
/// Platform Firmware Profile: a SHA-1-format first event carrying the
/// "Spec ID Event03" with the digest sizes, then TCG_PCR_EVENT2 records).
pub fn parse_event_log(data: &[u8]) -> anyhow::Result<Vec<Extension>> {
    let mut log = Reader { data, at: 0 };
    // The first event: PCR index, type, a SHA-1 digest, the Spec ID event.
    log.take(4 + 4 + 20)?;
    let size = log.u32()? as usize;
    let spec = log.take(size)?;
    if !spec.starts_with(b"Spec ID Event03\0") {
        bail!("not a crypto-agile event log (no Spec ID Event03)");
    }
    let mut spec = Reader { data: spec, at: 16 + 4 + 4 };
    let algorithms = spec.u32()?;
    let mut sizes = std::collections::HashMap::new();
    for _ in 0..algorithms {
        let id = spec.u16()?;
        sizes.insert(id, usize::from(spec.u16()?));
    }
    if sizes.get(&ALG_SHA256) != Some(&32) {
        bail!("the event log has no SHA-256 bank");
    }
    let mut extensions = Vec::new();
    while log.at < data.len() {
        let pcr = log.u32()?;
        let event_type = log.u32()?;
        let count = log.u32()?;
        let mut sha256 = None;
        for _ in 0..count {
            let id = log.u16()?;
            let size = *sizes.get(&id).with_context(|| format!("digest of unknown algorithm {id:#06x}"))?;
            let digest = log.take(size)?;
            if id == ALG_SHA256 {
                sha256 = Some(digest.try_into()?);
            }
        }
        let size = log.u32()? as usize;
        log.take(size)?;
        if event_type != EV_NO_ACTION {
            let sha256 = sha256.with_context(|| format!("an event of PCR {pcr} has no SHA-256 digest"))?;
            extensions.push(Extension { pcr, event_type, sha256 });
        }
    }
    Ok(extensions)
}

/// PCR `pcr` after every extension of it in `log`, each digest first
/// swapped by `replace` (old digest, new digest).
pub fn replay(log: &[Extension], pcr: u32, replace: &[([u8; 32], [u8; 32])]) -> [u8; 32] {
    log.iter().filter(|extension| extension.pcr == pcr).fold([0u8; 32], |value, extension| {
        let digest = replace.iter().find(|(old, _)| *old == extension.sha256).map_or(extension.sha256, |(_, new)| *new);
        Sha256::new().chain_update(value).chain_update(digest).finalize().into()
    })
}

/// The Authenticode SHA-256 of a PE image: what the firmware extends PCR 4
/// with when it starts it.
pub fn authenticode_sha256(image: &[u8]) -> anyhow::Result<[u8; 32]> {
    let pe = object::read::pe::PeFile64::parse(image).context("not a 64-bit PE image")?;
    let mut hasher = Sha256::new();
    authenticode::authenticode_digest(&pe, &mut hasher)
        .map_err(|error| anyhow::anyhow!("Authenticode digest: {error:?}"))?;
    Ok(hasher.finalize().into())
}

/// The `.linux` section of a UKI (the kernel, itself a PE image that
/// systemd-stub may hand to the firmware to start, measured like the UKI).
fn linux_section(image: &[u8]) -> anyhow::Result<Option<&[u8]>> {
    let pe = object::read::pe::PeFile64::parse(image).context("not a 64-bit PE image")?;
    for section in pe.section_table().iter() {
        if section.name.split(|&b| b == 0).next() == Some(&b".linux"[..]) {
            let data = section.pe_data(image).map_err(|error| anyhow::anyhow!(".linux: {error}"))?;
            let size = (section.virtual_size.get(object::LittleEndian) as usize).min(data.len());
            return Ok(Some(&data[..size]));
        }
    }
    Ok(None)
}

/// The digests to swap in the log when `new` boots instead of `booted`:
/// the UKI's, and its kernel's where both are PE images.
pub fn uki_replacements(booted: &[u8], new: &[u8]) -> anyhow::Result<Vec<([u8; 32], [u8; 32])>> {
    let mut pairs = vec![(authenticode_sha256(booted)?, authenticode_sha256(new)?)];
    if let (Some(booted), Some(new)) = (linux_section(booted)?, linux_section(new)?) {
        if let (Ok(booted), Ok(new)) = (authenticode_sha256(booted), authenticode_sha256(new)) {
            pairs.push((booted, new));
        }
    }
    Ok(pairs)
}

/// TPM2_PolicyPCR's digest over SHA-256 PCRs `pcrs` (ascending) holding
/// `values`: H(0…0 ‖ TPM_CC_PolicyPCR ‖ TPML_PCR_SELECTION ‖ H(values)).
/// systemd-cryptenroll records it as a TPM2 keyslot's `tpm2-policy-hash`.
pub fn policy_pcr_digest(pcrs: &[u8], values: &[[u8; 32]]) -> [u8; 32] {
    let mut select = [0u8; 3];
    for &pcr in pcrs {
        select[usize::from(pcr / 8)] |= 1 << (pcr % 8);
    }
    let values = values.iter().fold(Sha256::new(), |hasher, value| hasher.chain_update(value)).finalize();
    Sha256::new()
        .chain_update([0u8; 32])
        .chain_update(TPM_CC_POLICY_PCR.to_be_bytes())
        .chain_update(1u32.to_be_bytes())
        .chain_update(ALG_SHA256.to_be_bytes())
        .chain_update([3u8])
        .chain_update(select)
        .chain_update(values)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crypto-agile log: the Spec ID event (SHA-1 and SHA-256), then `events`.
    fn log(events: &[(u32, u32, [u8; 32])]) -> Vec<u8> {
        let mut spec = b"Spec ID Event03\0".to_vec();
        spec.extend(0u32.to_le_bytes()); // platform class
        spec.extend([0, 2, 0, 2]); // spec version 2.0, errata 0, uintn size
        spec.extend(2u32.to_le_bytes());
        spec.extend([0x04, 0x00, 20, 0]); // SHA-1, 20 bytes
        spec.extend([0x0B, 0x00, 32, 0]); // SHA-256, 32 bytes
        spec.push(0); // no vendor info
        let mut data = Vec::new();
        data.extend(0u32.to_le_bytes());
        data.extend(EV_NO_ACTION.to_le_bytes());
        data.extend([0u8; 20]);
        data.extend((spec.len() as u32).to_le_bytes());
        data.extend(spec);
        for (pcr, event_type, sha256) in events {
            data.extend(pcr.to_le_bytes());
            data.extend(event_type.to_le_bytes());
            data.extend(2u32.to_le_bytes());
            data.extend([0x04, 0x00]);
            data.extend([0xAA; 20]);
            data.extend([0x0B, 0x00]);
            data.extend(sha256);
            data.extend(3u32.to_le_bytes());
            data.extend(b"abc");
        }
        data
    }

    #[test]
    fn a_log_replays_to_its_pcr_and_to_the_prediction_with_a_digest_swapped() {
        let (action, separator, boot, uki, new_uki) = ([1u8; 32], [2u8; 32], [3u8; 32], [4u8; 32], [5u8; 32]);
        let data = log(&[
            (4, 0x8000_0007, action),
            (0, 4, [9; 32]),
            (4, 4, separator),
            (4, EV_NO_ACTION, [7; 32]),
            (4, 0x8000_0003, boot),
            (4, 0x8000_0003, uki),
        ]);
        let extensions = parse_event_log(&data).unwrap();
        assert_eq!(extensions.len(), 5, "the EV_NO_ACTION event extends nothing");
        let by_hand = |digests: &[[u8; 32]]| {
            digests.iter().fold([0u8; 32], |value, digest| {
                Sha256::new().chain_update(value).chain_update(digest).finalize().into()
            })
        };
        assert_eq!(replay(&extensions, 4, &[]), by_hand(&[action, separator, boot, uki]));
        assert_eq!(replay(&extensions, 4, &[(uki, new_uki)]), by_hand(&[action, separator, boot, new_uki]));
        assert_eq!(replay(&extensions, 0, &[]), by_hand(&[[9; 32]]));
    }

    #[test]
    fn a_truncated_or_foreign_log_is_an_error() {
        let data = log(&[(4, 4, [2; 32])]);
        assert!(parse_event_log(&data[..data.len() - 1]).is_err());
        assert!(parse_event_log(&[0u8; 64]).is_err());
    }

    #[test]
    fn the_policy_digest_is_the_one_the_tpm_computes_for_pcr_4_and_12() {
        // An independent computation of the same TPM 2.0 structure.
        let (pcr4, pcr12) = ([0x11u8; 32], [0u8; 32]);
        let values: [u8; 32] = Sha256::new().chain_update(pcr4).chain_update(pcr12).finalize().into();
        let mut input = vec![0u8; 32];
        input.extend([0x00, 0x00, 0x01, 0x7F, 0, 0, 0, 1, 0x00, 0x0B, 3, 0x10, 0x10, 0x00]);
        input.extend(values);
        let expected: [u8; 32] = Sha256::digest(&input).into();
        assert_eq!(policy_pcr_digest(&[4, 12], &[pcr4, pcr12]), expected);
    }
}
