//! The vault's cryptographic primitives: AES-256-GCM with associated data,
//! PBKDF2-HMAC-SHA256, HMAC-SHA256 and the zeroizing 256-bit key type.
//!
//! Nothing here touches files, the TPM or the keyring.

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::rngs::OsRng;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// Key length of AES-256 and of every key the vault handles, in bytes.
pub const KEY_LEN: usize = 32;
/// AES-GCM nonce (`iv` in the files) length: 96 bits.
pub const NONCE_LEN: usize = 12;
/// AES-GCM authentication tag length: 128 bits.
pub const TAG_LEN: usize = 16;
/// PBKDF2 iteration count for every derivation (OWASP 2024), fixed by
/// specs/vault/README.md ("Key hierarchy").
pub const KDF_ITERATIONS: u32 = 600_000;
/// Length of the random salts the vault generates (passphrase and recovery
/// key), specs/vault/README.md ("Key hierarchy").
pub const SALT_LEN: usize = 16;
/// Name of the KDF as written into files.
pub const KDF_ALGORITHM: &str = "PBKDF2-HMAC-SHA256";
/// Name of the cipher as written into files.
pub const CIPHER_ALGORITHM: &str = "AES-256-GCM";

/// A 256-bit key that is wiped from memory when dropped and never printed.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Key256([u8; KEY_LEN]);

impl Key256 {
    /// A fresh key from the operating system's CSPRNG.
    pub(crate) fn random() -> Self {
        let mut key = Key256([0; KEY_LEN]);
        OsRng.fill_bytes(&mut key.0);
        key
    }

    /// Copies exactly [`KEY_LEN`] bytes into a key; `None` for any other length.
    pub(crate) fn from_slice(bytes: &[u8]) -> Option<Self> {
        let array: [u8; KEY_LEN] = bytes.try_into().ok()?;
        Some(Key256(array))
    }

    pub(crate) fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for Key256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key256(<redacted>)")
    }
}

/// Random bytes from the operating system's CSPRNG.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0; N];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

/// PBKDF2-HMAC-SHA256 with [`KDF_ITERATIONS`] rounds, 256-bit output.
pub(crate) fn pbkdf2_sha256(password: &[u8], salt: &[u8]) -> Key256 {
    let mut key = Key256([0; KEY_LEN]);
    pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, KDF_ITERATIONS, &mut key.0);
    key
}

/// HMAC-SHA256 of `parts` concatenated, each prefixed by its length so that
/// no two different part lists produce the same input.
pub(crate) fn hmac_sha256(key: &Key256, parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Derives an independent sub-key for one purpose (`label`) from `key`.
pub(crate) fn subkey(key: &Key256, label: &str) -> Key256 {
    Key256(hmac_sha256(key, &[b"clawos-vault-subkey", label.as_bytes()]))
}

/// The stored form of one AES-256-GCM encryption, base64 fields named as in
/// specs/vault/README.md ("Files").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ciphertext {
    /// Ciphertext without the tag.
    pub encrypted_value: String,
    /// The 96-bit nonce.
    pub iv: String,
    /// The 128-bit GCM tag.
    pub auth_tag: String,
}

/// Why a [`Ciphertext`] could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// A field is not base64 or has the wrong length; the file is malformed.
    #[error("malformed ciphertext field `{field}`")]
    Malformed {
        /// Which field.
        field: &'static str,
    },
    /// The tag does not match: wrong key, or the ciphertext, nonce, tag or
    /// associated data were changed.
    #[error("authentication failed")]
    Authentication,
}

/// Encrypts `plaintext` under `key` with a fresh random nonce, binding `aad`.
pub(crate) fn encrypt(key: &Key256, aad: &[u8], plaintext: &[u8]) -> Ciphertext {
    let cipher = Aes256Gcm::new(key.as_bytes().into());
    let nonce: [u8; NONCE_LEN] = random_bytes();
    let mut buffer = plaintext.to_vec();
    let tag = cipher
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), aad, &mut buffer)
        .expect("AES-GCM encryption only fails past 64 GiB of plaintext");
    Ciphertext { encrypted_value: BASE64.encode(&buffer), iv: BASE64.encode(nonce), auth_tag: BASE64.encode(tag) }
}

/// Decrypts and authenticates `ciphertext` under `key` with `aad`.
pub(crate) fn decrypt(key: &Key256, aad: &[u8], ciphertext: &Ciphertext) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let decode = |field: &'static str, text: &str| BASE64.decode(text).map_err(|_| CryptoError::Malformed { field });
    let nonce = decode("iv", &ciphertext.iv)?;
    let tag = decode("auth_tag", &ciphertext.auth_tag)?;
    if nonce.len() != NONCE_LEN {
        return Err(CryptoError::Malformed { field: "iv" });
    }
    if tag.len() != TAG_LEN {
        return Err(CryptoError::Malformed { field: "auth_tag" });
    }
    let mut buffer = Zeroizing::new(decode("encrypted_value", &ciphertext.encrypted_value)?);
    Aes256Gcm::new(key.as_bytes().into())
        .decrypt_in_place_detached(Nonce::from_slice(&nonce), aad, &mut buffer, Tag::from_slice(&tag))
        .map_err(|_| CryptoError::Authentication)?;
    Ok(buffer)
}

/// KDF parameters as stored next to a ciphertext (the `kdf` object of
/// specs/vault/README.md, "Files").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KdfParams {
    /// Always [`KDF_ALGORITHM`].
    pub algorithm: String,
    /// Always [`KDF_ITERATIONS`]; files with another count are refused.
    pub iterations: u32,
    /// Base64 of the salt bytes.
    pub salt: String,
}

impl KdfParams {
    pub(crate) fn new(salt: &[u8]) -> Self {
        KdfParams { algorithm: KDF_ALGORITHM.to_owned(), iterations: KDF_ITERATIONS, salt: BASE64.encode(salt) }
    }

    /// The salt, if the parameters are exactly the ones this vault writes.
    pub(crate) fn checked_salt(&self) -> Option<Vec<u8>> {
        if self.algorithm != KDF_ALGORITHM || self.iterations != KDF_ITERATIONS {
            return None;
        }
        BASE64.decode(&self.salt).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_field_is_authenticated() {
        let key = Key256::random();
        let sealed = encrypt(&key, b"aad", b"hello");
        assert_eq!(&decrypt(&key, b"aad", &sealed).unwrap()[..], b"hello");
        assert!(matches!(decrypt(&key, b"aae", &sealed), Err(CryptoError::Authentication)));
        assert!(matches!(decrypt(&Key256::random(), b"aad", &sealed), Err(CryptoError::Authentication)));
        let mut short_tag = sealed.clone();
        short_tag.auth_tag = BASE64.encode([0u8; 8]);
        assert!(matches!(decrypt(&key, b"aad", &short_tag), Err(CryptoError::Malformed { field: "auth_tag" })));
    }

    #[test]
    fn subkeys_are_domain_separated() {
        let key = Key256::random();
        assert_ne!(subkey(&key, "audit"), subkey(&key, "manifest"));
        assert_ne!(hmac_sha256(&key, &[b"ab", b"c"]), hmac_sha256(&key, &[b"a", b"bc"]));
    }
}
