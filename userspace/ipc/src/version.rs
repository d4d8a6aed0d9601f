//! Protocol versions and the `hello` negotiation (spec "Version Negotiation").

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A `major.minor` protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolVersion {
    /// Breaking-change counter.
    pub major: u16,
    /// Additive-change counter.
    pub minor: u16,
}

impl ProtocolVersion {
    /// v1.0, the version this crate implements.
    pub const V1_0: ProtocolVersion = ProtocolVersion::new(1, 0);

    /// A version from its parts.
    pub const fn new(major: u16, minor: u16) -> Self {
        ProtocolVersion { major, minor }
    }

    /// What a peer implementing `self` can speak: every minor of the same
    /// major up to `self` (minor bumps are additive only, so a 1.1 peer still
    /// speaks 1.0; a major bump breaks compatibility).
    pub fn speakable(self) -> Vec<ProtocolVersion> {
        (0..=self.minor).map(|minor| ProtocolVersion::new(self.major, minor)).collect()
    }
}

/// The versions this implementation speaks, highest last.
pub const SUPPORTED_VERSIONS: [ProtocolVersion; 1] = [ProtocolVersion::V1_0];

/// The highest version both sides speak, or `None` (the server then answers
/// EPROTO and closes the connection).
pub fn negotiate(client: &[ProtocolVersion], server: &[ProtocolVersion]) -> Option<ProtocolVersion> {
    client.iter().filter(|version| server.contains(version)).max().copied()
}

/// A version string that is not `<digits>.<digits>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protocol version `{text}` (expected MAJOR.MINOR, e.g. 1.0)")]
pub struct InvalidVersion {
    /// The rejected text.
    pub text: String,
}

impl FromStr for ProtocolVersion {
    type Err = InvalidVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidVersion { text: text.to_owned() };
        let (major, minor) = text.split_once('.').ok_or_else(invalid)?;
        let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(major) || !all_digits(minor) {
            return Err(invalid());
        }
        Ok(ProtocolVersion::new(major.parse().map_err(|_| invalid())?, minor.parse().map_err(|_| invalid())?))
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> ProtocolVersion {
        text.parse().unwrap()
    }

    /// The spec's "Version Compatibility Matrix", row by row.
    #[test]
    fn version_matrix_from_the_spec() {
        let cases = [
            ("1.0", "1.0", Some("1.0")),
            ("1.0", "1.1", Some("1.0")),
            ("1.0", "2.0", None),
            ("1.1", "1.0", Some("1.0")),
            ("1.1", "1.1", Some("1.1")),
            ("1.1", "2.0", None),
            ("2.0", "1.0", None),
            ("2.0", "1.1", None),
            ("2.0", "2.0", Some("2.0")),
        ];
        for (client, server, expected) in cases {
            let agreed = negotiate(&v(client).speakable(), &v(server).speakable());
            assert_eq!(agreed, expected.map(v), "client {client} / server {server}");
        }
    }

    #[test]
    fn parsing_rejects_what_the_schema_pattern_rejects() {
        for bad in ["1", "1.", ".1", "v1.0", "1.0.0", "1.x", "", "+1.0"] {
            assert!(bad.parse::<ProtocolVersion>().is_err(), "{bad}");
        }
        assert_eq!(v("10.20"), ProtocolVersion::new(10, 20));
        assert_eq!(v("1.0").to_string(), "1.0");
    }
}
