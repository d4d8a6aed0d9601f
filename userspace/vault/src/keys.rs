//! Operator-held credentials: the recovery key shown once at init and the
//! passphrase of a vault without a TPM. Both wipe themselves on drop and
//! never print through `Debug`.

use zeroize::Zeroizing;

use crate::crypto::{random_bytes, KEY_LEN};
use crate::error::VaultError;

/// 256 random bits that unlock the master key when the TPM will not.
pub struct RecoveryKey(Zeroizing<[u8; KEY_LEN]>);

impl RecoveryKey {
    pub(crate) fn generate() -> Self {
        RecoveryKey(Zeroizing::new(random_bytes()))
    }

    /// Parses the form [`RecoveryKey::reveal`] prints: 64 hex digits; dashes,
    /// spaces and case are ignored.
    pub fn parse(text: &str) -> Result<Self, VaultError> {
        let digits: Zeroizing<Vec<u8>> =
            Zeroizing::new(text.bytes().filter(|byte| !matches!(byte, b'-' | b' ' | b'\n' | b'\t')).collect());
        if digits.len() != 2 * KEY_LEN {
            return Err(VaultError::MalformedRecoveryKey);
        }
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| VaultError::MalformedRecoveryKey)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| VaultError::MalformedRecoveryKey)?;
        }
        Ok(RecoveryKey(bytes))
    }

    /// The key as 16 dash-separated groups of 4 hex digits, to show the
    /// operator once.
    pub fn reveal(&self) -> Zeroizing<String> {
        let hex = Zeroizing::new(fsutil::hex(&self.0[..]));
        let mut grouped = Zeroizing::new(String::with_capacity(80));
        for (index, chunk) in hex.as_bytes().chunks(4).enumerate() {
            if index > 0 {
                grouped.push('-');
            }
            grouped.push_str(std::str::from_utf8(chunk).expect("hex is ASCII"));
        }
        grouped
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0[..]
    }
}

impl std::fmt::Debug for RecoveryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryKey(<redacted>)")
    }
}

/// The operator passphrase protecting a vault without a TPM.
pub struct Passphrase(Zeroizing<String>);

impl Passphrase {
    /// Wraps a passphrase; the `String` is taken so no other copy lingers.
    pub fn new(passphrase: String) -> Self {
        Passphrase(Zeroizing::new(passphrase))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passphrase(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_key_round_trips_through_its_printed_form() {
        let key = RecoveryKey::generate();
        let shown = key.reveal();
        assert_eq!(shown.len(), 64 + 15);
        let parsed = RecoveryKey::parse(&shown.to_uppercase()).unwrap();
        assert_eq!(parsed.as_bytes(), key.as_bytes());
        assert!(RecoveryKey::parse("abcd").is_err());
        assert!(RecoveryKey::parse(&"zz".repeat(32)).is_err());
        assert_eq!(format!("{key:?}"), "RecoveryKey(<redacted>)");
    }
}
