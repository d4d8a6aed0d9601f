//! Sealing and unsealing the master key with a TPM 2.0 through tss-esapi.
//!
//! The sealed object is a keyed-hash object under the owner hierarchy's
//! ECC P-256 storage primary (the TCG SRK template). On the box that key is
//! the one systemd-tpm2-setup keeps at [`SRK_HANDLE`], used as it is: once
//! the box holds the TPM's owner authorisation (specs/clawfs/encryption.md,
//! "The volume's anchor"), nothing without it can create a primary key.
//! Where none is persisted (a bare TPM, the tests) the same key is derived
//! again on every use. Its only authorization is a
//! PolicyPCR over the SHA-256 bank, and user-with-auth is clear, so no
//! password can stand in for the PCR state. The sessions that carry the key
//! to and from the TPM are salted with the primary key and encrypt their
//! parameters, so the key does not cross the TPM bus in clear.
//!
//! The policy may be a PolicyOR of PolicyPCR branches: the PCRs as they are
//! now and as they will be when a new version boots (specs/update/README.md,
//! "The TPM across an update"), so the key unseals under either version and
//! a rollback keeps it.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tss_esapi::attributes::{ObjectAttributesBuilder, SessionAttributesBuilder};
use tss_esapi::constants::response_code::Tss2ResponseCodeKind;
use tss_esapi::constants::SessionType;
use tss_esapi::handles::{KeyHandle, PersistentTpmHandle};
use tss_esapi::interface_types::algorithm::{HashingAlgorithm, PublicAlgorithm};
use tss_esapi::interface_types::ecc::EccCurve;
use tss_esapi::interface_types::resource_handles::Hierarchy;
use tss_esapi::interface_types::session_handles::{AuthSession, PolicySession};
use tss_esapi::structures::{
    Digest, DigestList, EccPoint, KeyedHashScheme, PcrSelectionList, PcrSelectionListBuilder, PcrSlot, Private, Public,
    PublicBuilder, PublicEccParametersBuilder, PublicKeyedHashParameters, SensitiveData, SymmetricDefinition,
    SymmetricDefinitionObject,
};
use tss_esapi::tcti_ldr::TctiNameConf;
use tss_esapi::traits::{Marshall, UnMarshall};
use tss_esapi::Context;

use crate::crypto::Key256;

/// Why a TPM operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TpmError {
    /// The TCTI string is not one tss-esapi understands.
    #[error("invalid TCTI configuration `{tcti}`")]
    InvalidTcti {
        /// The configured string.
        tcti: String,
    },
    /// No TPM could be reached through the TCTI.
    #[error("TPM unavailable through `{tcti}`: {source}")]
    Unavailable {
        /// The configured string.
        tcti: String,
        /// What tss-esapi reported.
        #[source]
        source: tss_esapi::Error,
    },
    /// The PCRs no longer hold the values the key was sealed to.
    #[error("PCR policy check failed: the boot state differs from the sealed one")]
    PcrMismatch,
    /// A PCR index outside 0..=23 was configured.
    #[error("PCR {index} does not exist")]
    InvalidPcr {
        /// The offending index.
        index: u8,
    },
    /// A TPM command failed.
    #[error("TPM command {command} failed: {source}")]
    Command {
        /// Which command.
        command: &'static str,
        /// What the TPM or tss-esapi reported.
        #[source]
        source: tss_esapi::Error,
    },
}

/// A sealed master key as stored in master-key.enc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedKey {
    /// Always "sha256".
    pub pcr_bank: String,
    /// PCR indices the policy covers.
    pub pcrs: Vec<u8>,
    /// Hex of each PolicyPCR digest the policy accepts (PolicyOR), when it
    /// accepts more than one set of values; empty: only the sealed ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<String>,
    /// Base64 of the marshalled TPM2B_PUBLIC of the sealed object.
    pub public: String,
    /// Base64 of the TPM2B_PRIVATE (encrypted by the TPM's storage key).
    pub private: String,
}

/// The persistent handle of the storage root key: the TCG's reserved handle
/// for it, where systemd-tpm2-setup makes it persistent at every boot (the
/// same template as [`storage_primary_template`], so the same key).
pub(crate) const SRK_HANDLE: u32 = 0x8100_0001;

/// One connection to the TPM.
pub(crate) struct Tpm {
    context: Context,
}

fn command(command: &'static str) -> impl FnOnce(tss_esapi::Error) -> TpmError {
    move |source| TpmError::Command { command, source }
}

fn pcr_selection(pcrs: &[u8]) -> Result<PcrSelectionList, TpmError> {
    let slots = pcrs
        .iter()
        .map(|&index| {
            if index > crate::config::MAX_PCR {
                return Err(TpmError::InvalidPcr { index });
            }
            PcrSlot::try_from(1u32 << index).map_err(|_| TpmError::InvalidPcr { index })
        })
        .collect::<Result<Vec<_>, _>>()?;
    PcrSelectionListBuilder::new()
        .with_selection(HashingAlgorithm::Sha256, &slots)
        .build()
        .map_err(command("PCR selection"))
}

fn digest_list(digests: &[Digest]) -> Result<DigestList, TpmError> {
    let mut list = DigestList::new();
    for digest in digests {
        list.add(digest.clone()).map_err(command("PolicyOR"))?;
    }
    Ok(list)
}

/// The storage root key's template: the TCG's ECC P-256 SRK template, the
/// one systemd-tpm2-setup persists at 0x81000001 (public, so the tests'
/// software TPM can be provisioned as the box's is).
pub fn storage_primary_template() -> Result<Public, tss_esapi::Error> {
    let attributes = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_sensitive_data_origin(true)
        .with_user_with_auth(true)
        .with_no_da(true)
        .with_restricted(true)
        .with_decrypt(true)
        .build()?;
    PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::Ecc)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attributes)
        .with_ecc_parameters(
            PublicEccParametersBuilder::new_restricted_decryption_key(
                SymmetricDefinitionObject::AES_128_CFB,
                EccCurve::NistP256,
            )
            .build()?,
        )
        .with_ecc_unique_identifier(EccPoint::default())
        .build()
}

fn sealed_object_template(policy: Digest) -> Result<Public, tss_esapi::Error> {
    // user_with_auth clear: only the PCR policy authorizes unsealing.
    let attributes = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_no_da(true)
        .with_admin_with_policy(true)
        .build()?;
    PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::KeyedHash)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attributes)
        .with_auth_policy(policy)
        .with_keyed_hash_parameters(PublicKeyedHashParameters::new(KeyedHashScheme::Null))
        .with_keyed_hash_unique_identifier(Digest::default())
        .build()
}

impl Tpm {
    /// Connects through `tcti`.
    pub(crate) fn connect(tcti: &str) -> Result<Self, TpmError> {
        let conf = TctiNameConf::from_str(tcti).map_err(|_| TpmError::InvalidTcti { tcti: tcti.to_owned() })?;
        let context = Context::new(conf).map_err(|source| TpmError::Unavailable { tcti: tcti.to_owned(), source })?;
        Ok(Tpm { context })
    }

    fn storage_primary(&mut self) -> Result<KeyHandle, TpmError> {
        let persistent = PersistentTpmHandle::new(SRK_HANDLE).map_err(command("SRK handle"))?;
        match self.context.execute_without_session(|context| context.tr_from_tpm_public(persistent.into())) {
            Ok(srk) => {
                let srk = KeyHandle::from(srk);
                let (public, _, _) = self
                    .context
                    .execute_without_session(|context| context.read_public(srk))
                    .map_err(command("ReadPublic (SRK)"))?;
                // Only a key the TPM made and never lets out: under one that
                // may leave it (planted there by whoever held the TPM before
                // the box) the TPM refuses the sealed object (fixed to the
                // TPM), and the vault would not open. Anything else is passed
                // over for the derived key (which needs the owner's
                // authorisation once the box holds it).
                let attributes = public.object_attributes();
                if attributes.fixed_tpm()
                    && attributes.fixed_parent()
                    && attributes.sensitive_data_origin()
                    && attributes.restricted()
                    && attributes.decrypt()
                {
                    return Ok(srk);
                }
            }
            // None persisted: derived below.
            Err(tss_esapi::Error::Tss2Error(code)) if code.kind() == Some(Tss2ResponseCodeKind::Handle) => {}
            Err(source) => return Err(TpmError::Command { command: "ReadPublic (SRK)", source }),
        }
        let template = storage_primary_template().map_err(command("CreatePrimary template"))?;
        self.context
            .execute_with_nullauth_session(|context| {
                context.create_primary(Hierarchy::Owner, template, None, None, None, None)
            })
            .map(|created| created.key_handle)
            .map_err(command("CreatePrimary"))
    }

    /// A session salted with the storage primary whose parameters are encrypted
    /// in the directions given.
    fn encrypted_session(
        &mut self,
        primary: KeyHandle,
        kind: SessionType,
        encrypt_response: bool,
        decrypt_command: bool,
    ) -> Result<AuthSession, TpmError> {
        let session = self
            .context
            .start_auth_session(
                Some(primary),
                None,
                None,
                kind,
                SymmetricDefinition::AES_128_CFB,
                HashingAlgorithm::Sha256,
            )
            .map_err(command("StartAuthSession"))?
            .ok_or(TpmError::Command {
                command: "StartAuthSession",
                source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::WrongValueFromTpm),
            })?;
        let (attributes, mask) = SessionAttributesBuilder::new()
            .with_continue_session(true)
            .with_encrypt(encrypt_response)
            .with_decrypt(decrypt_command)
            .build();
        self.context.tr_sess_set_attributes(session, attributes, mask).map_err(command("TRSess_SetAttributes"))?;
        Ok(session)
    }

    /// The policy digest PolicyPCR yields over `pcrs` as they are now.
    fn current_policy_digest(&mut self, pcrs: &PcrSelectionList) -> Result<Digest, TpmError> {
        // An empty PCR digest makes the TPM use the current PCR values:
        // exactly what a real session will compare against.
        self.trial(|context, trial| {
            context.policy_pcr(trial, Digest::default(), pcrs.clone()).map_err(command("PolicyPCR"))
        })
    }

    /// The policy digest PolicyPCR yields over `pcrs` holding `values`
    /// (SHA-256, in ascending PCR order).
    fn policy_digest_for(&mut self, pcrs: &PcrSelectionList, values: &[[u8; 32]]) -> Result<Digest, TpmError> {
        use sha2::Digest as _;
        let hasher = values.iter().fold(sha2::Sha256::new(), |hasher, value| hasher.chain_update(value));
        let pcr_digest = Digest::try_from(hasher.finalize().to_vec()).map_err(command("PolicyPCR"))?;
        self.trial(|context, trial| context.policy_pcr(trial, pcr_digest, pcrs.clone()).map_err(command("PolicyPCR")))
    }

    /// The policy digest PolicyOR yields over `branches` (2 to 8).
    fn or_policy_digest(&mut self, branches: &[Digest]) -> Result<Digest, TpmError> {
        let list = digest_list(branches)?;
        self.trial(|context, trial| context.policy_or(trial, list).map_err(command("PolicyOR")))
    }

    /// The current values of `pcrs` (SHA-256), ascending.
    pub(crate) fn pcr_values(&mut self, pcrs: &[u8]) -> Result<Vec<[u8; 32]>, TpmError> {
        let mut sorted = pcrs.to_vec();
        sorted.sort_unstable();
        let mut values = Vec::new();
        for pcr in sorted {
            let selection = pcr_selection(&[pcr])?;
            let (_, _, digests) = self
                .context
                .execute_without_session(|context| context.pcr_read(selection))
                .map_err(command("PCR_Read"))?;
            let value = digests.value().first().and_then(|digest| <[u8; 32]>::try_from(digest.value()).ok()).ok_or(
                TpmError::Command {
                    command: "PCR_Read",
                    source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::WrongValueFromTpm),
                },
            )?;
            values.push(value);
        }
        Ok(values)
    }

    /// Runs `step` in a fresh trial session and returns the policy digest.
    fn trial(
        &mut self,
        step: impl FnOnce(&mut Context, PolicySession) -> Result<(), TpmError>,
    ) -> Result<Digest, TpmError> {
        let trial = self
            .context
            .start_auth_session(
                None,
                None,
                None,
                SessionType::Trial,
                SymmetricDefinition::AES_128_CFB,
                HashingAlgorithm::Sha256,
            )
            .map_err(command("StartAuthSession"))?
            .and_then(|session| PolicySession::try_from(session).ok())
            .ok_or(TpmError::Command {
                command: "StartAuthSession",
                source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::WrongValueFromTpm),
            })?;
        step(&mut self.context, trial)?;
        let digest = self.context.policy_get_digest(trial).map_err(command("PolicyGetDigest"))?;
        self.context
            .flush_context(tss_esapi::handles::SessionHandle::from(trial).into())
            .map_err(command("FlushContext"))?;
        Ok(digest)
    }

    /// Seals `key` to the current values of `pcrs`, and to each PolicyPCR
    /// digest in `also` (other values of the same PCRs).
    pub(crate) fn seal(&mut self, key: &Key256, pcrs: &[u8], also: &[Digest]) -> Result<SealedKey, TpmError> {
        let selection = pcr_selection(pcrs)?;
        let mut branches = vec![self.current_policy_digest(&selection)?];
        for digest in also {
            if !branches.contains(digest) {
                branches.push(digest.clone());
            }
        }
        let policy = match branches.len() {
            1 => branches[0].clone(),
            _ => self.or_policy_digest(&branches)?,
        };
        let template = sealed_object_template(policy).map_err(command("Create template"))?;
        let primary = self.storage_primary()?;
        let session = self.encrypted_session(primary, SessionType::Hmac, false, true)?;
        let sensitive = SensitiveData::try_from(key.as_bytes().to_vec()).map_err(command("Create"))?;
        let created = self
            .context
            .execute_with_session(Some(session), |context| {
                context.create(primary, template, None, Some(sensitive), None, None)
            })
            .map_err(command("Create"))?;
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        Ok(SealedKey {
            pcr_bank: "sha256".to_owned(),
            pcrs: pcrs.to_vec(),
            branches: if branches.len() > 1 {
                branches.iter().map(|digest| fsutil::hex(digest.value())).collect()
            } else {
                Vec::new()
            },
            public: base64.encode(created.out_public.marshall().map_err(command("Marshal"))?),
            private: base64.encode(created.out_private.value()),
        })
    }

    /// The PolicyPCR digest of `sealed`'s PCRs with PCR `pcr` holding
    /// `value` and the others as they are now: the branch to add so the key
    /// also unseals once `pcr` has that value.
    pub(crate) fn branch_with(&mut self, sealed: &SealedKey, pcr: u8, value: [u8; 32]) -> Result<Digest, TpmError> {
        let mut sorted = sealed.pcrs.clone();
        sorted.sort_unstable();
        let mut values = self.pcr_values(&sorted)?;
        let index = sorted.iter().position(|&p| p == pcr).ok_or(TpmError::InvalidPcr { index: pcr })?;
        values[index] = value;
        self.policy_digest_for(&pcr_selection(&sorted)?, &values)
    }

    /// The PolicyOR branches `sealed` accepts (empty: a plain PolicyPCR).
    pub(crate) fn branches(sealed: &SealedKey) -> Result<Vec<Digest>, TpmError> {
        sealed
            .branches
            .iter()
            .map(|hex| {
                fsutil::unhex(hex).and_then(|bytes| Digest::try_from(bytes).ok()).ok_or(TpmError::Command {
                    command: "Load (decode sealed blob)",
                    source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::InvalidParam),
                })
            })
            .collect()
    }

    fn decode(sealed: &SealedKey) -> Result<(Public, Private), TpmError> {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        let malformed = || TpmError::Command {
            command: "Load (decode sealed blob)",
            source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::InvalidParam),
        };
        let public = base64.decode(&sealed.public).map_err(|_| malformed())?;
        let private = base64.decode(&sealed.private).map_err(|_| malformed())?;
        Ok((
            Public::unmarshall(&public).map_err(command("Unmarshal public"))?,
            Private::try_from(private).map_err(command("Unmarshal private"))?,
        ))
    }

    /// Whether the current PCR values satisfy the sealed object's policy,
    /// without unsealing.
    pub(crate) fn policy_matches(&mut self, sealed: &SealedKey) -> Result<bool, TpmError> {
        let (public, _) = Self::decode(sealed)?;
        let current = self.current_policy_digest(&pcr_selection(&sealed.pcrs)?)?;
        let branches = Self::branches(sealed)?;
        Ok(if branches.is_empty() { public.auth_policy() == &current } else { branches.contains(&current) })
    }

    /// Unseals the key; [`TpmError::PcrMismatch`] when the PCRs moved.
    pub(crate) fn unseal(&mut self, sealed: &SealedKey) -> Result<Key256, TpmError> {
        let (public, private) = Self::decode(sealed)?;
        let branches = Self::branches(sealed)?;
        let selection = pcr_selection(&sealed.pcrs)?;
        let primary = self.storage_primary()?;
        let load_session = self.encrypted_session(primary, SessionType::Hmac, false, false)?;
        let object = self
            .context
            .execute_with_session(Some(load_session), |context| context.load(primary, private, public))
            .map_err(command("Load"))?;
        let policy_session = self.encrypted_session(primary, SessionType::Policy, true, false)?;
        let policy = PolicySession::try_from(policy_session).map_err(command("PolicySession"))?;
        self.context
            .execute_without_session(|context| context.policy_pcr(policy, Digest::default(), selection))
            .map_err(command("PolicyPCR"))?;
        if !branches.is_empty() {
            // The TPM accepts the session's digest only if it is a branch:
            // PCRs matching none of them fail here, like PolicyPCR alone.
            let list = digest_list(&branches)?;
            self.context.execute_without_session(|context| context.policy_or(policy, list)).map_err(|source| {
                match source {
                    tss_esapi::Error::Tss2Error(code) if code.kind() == Some(Tss2ResponseCodeKind::Value) => {
                        TpmError::PcrMismatch
                    }
                    source => TpmError::Command { command: "PolicyOR", source },
                }
            })?;
        }
        let unsealed = self
            .context
            .execute_with_session(Some(policy_session), |context| context.unseal(object.into()))
            .map_err(|source| match source {
                tss_esapi::Error::Tss2Error(code) if code.kind() == Some(Tss2ResponseCodeKind::PolicyFail) => {
                    TpmError::PcrMismatch
                }
                source => TpmError::Command { command: "Unseal", source },
            })?;
        Key256::from_slice(unsealed.value()).ok_or(TpmError::Command {
            command: "Unseal (unexpected length)",
            source: tss_esapi::Error::WrapperError(tss_esapi::WrapperErrorKind::WrongValueFromTpm),
        })
    }
}
