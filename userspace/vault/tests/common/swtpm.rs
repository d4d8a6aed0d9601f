//! A real swtpm for tests: its own state directory, TCP ports on loopback,
//! killed on drop. Shared by the vault's tests and, through `#[path]`, by
//! security-agent's vault service test, so the TPM both run against starts
//! the same way.

#![allow(dead_code)] // each test binary uses a different subset

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use tss_esapi::handles::PcrHandle;
use tss_esapi::interface_types::algorithm::HashingAlgorithm;
use tss_esapi::interface_types::session_handles::AuthSession;
use tss_esapi::structures::{Digest, DigestValues};
use tss_esapi::tcti_ldr::TctiNameConf;

/// Where the storage root key is kept persistent (systemd-tpm2-setup's
/// handle, which the vault looks at first).
const SRK_HANDLE: u32 = 0x8100_0001;

/// A swtpm process with its own state directory, killed on drop.
pub struct Swtpm {
    child: Child,
    port: u16,
    state_dir: PathBuf,
}

fn port_pair_free(port: u16) -> bool {
    port < u16::MAX
        && TcpListener::bind(("127.0.0.1", port)).is_ok()
        && TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
}

impl Swtpm {
    /// Starts swtpm with state in `state_dir`; `None`, announced loudly,
    /// when the swtpm binary is not installed.
    pub fn start(state_dir: &Path) -> Option<Self> {
        if Command::new("swtpm").arg("--version").output().is_err() {
            clawos_test_require::missing("the TPM tests", "swtpm is not installed");
            return None;
        }
        std::fs::create_dir_all(state_dir).unwrap();
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            if !port_pair_free(port) {
                continue;
            }
            let mut child = Command::new("swtpm")
                .args(["socket", "--tpm2", "--tpmstate"])
                .arg(format!("dir={}", state_dir.display()))
                .args(["--server", &format!("type=tcp,port={port},bindaddr=127.0.0.1")])
                .args(["--ctrl", &format!("type=tcp,port={},bindaddr=127.0.0.1", port + 1)])
                .args(["--flags", "not-need-init,startup-clear"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn swtpm");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Swtpm { child, port, state_dir: state_dir.to_owned() });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("swtpm did not start");
    }

    pub fn tcti(&self) -> String {
        format!("swtpm:host=127.0.0.1,port={}", self.port)
    }

    /// Stops the TPM (its state stays on disk for [`Swtpm::restart`]).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A new swtpm process over the same state: same seeds, PCRs reset.
    pub fn restart(mut self) -> Self {
        self.stop();
        Swtpm::start(&self.state_dir.clone()).expect("swtpm was there a moment ago")
    }

    /// Extends a PCR of the SHA-256 bank, as a measured-boot component would.
    pub fn extend_pcr(&self, pcr: PcrHandle) {
        self.extend_pcr_with(pcr, 0x5a);
    }

    /// Extends a PCR of the SHA-256 bank with 32 bytes of `byte`.
    pub fn extend_pcr_with(&self, pcr: PcrHandle, byte: u8) {
        let mut context = tss_esapi::Context::new(TctiNameConf::from_str(&self.tcti()).unwrap()).unwrap();
        let mut digests = DigestValues::new();
        digests.set(HashingAlgorithm::Sha256, Digest::try_from(vec![byte; 32]).unwrap());
        context.execute_with_session(Some(AuthSession::Password), |context| context.pcr_extend(pcr, digests)).unwrap();
    }
}

impl Swtpm {
    /// The SHA-256 bank's value of PCR `index`.
    pub fn pcr_sha256(&self, index: u8) -> Vec<u8> {
        use tss_esapi::structures::{PcrSelectionListBuilder, PcrSlot};
        let mut context = tss_esapi::Context::new(TctiNameConf::from_str(&self.tcti()).unwrap()).unwrap();
        let selection = PcrSelectionListBuilder::new()
            .with_selection(HashingAlgorithm::Sha256, &[PcrSlot::try_from(1u32 << index).unwrap()])
            .build()
            .unwrap();
        let (_, _, digests) = context.pcr_read(selection).unwrap();
        digests.value()[0].value().to_vec()
    }
}

impl Swtpm {
    /// What clawfs-keys does to the box's TPM at first boot
    /// (specs/clawfs/encryption.md, "The volume's anchor"), as far as the
    /// vault can tell: the storage root key made persistent at 0x81000001 (as
    /// systemd-tpm2-setup does, with the TCG SRK template), then the owner
    /// hierarchy's authorisation set to a value only clawfs-keys knows.
    pub fn persist_srk_and_take_ownership(&self) {
        use tss_esapi::handles::{AuthHandle, PersistentTpmHandle};
        use tss_esapi::interface_types::dynamic_handles::Persistent;
        use tss_esapi::interface_types::resource_handles::{Hierarchy, Provision};
        use tss_esapi::structures::Auth;
        let mut context = tss_esapi::Context::new(TctiNameConf::from_str(&self.tcti()).unwrap()).unwrap();
        let template = vault::storage_primary_template().unwrap();
        context.execute_with_session(Some(AuthSession::Password), |context| {
            let srk = context.create_primary(Hierarchy::Owner, template, None, None, None, None).unwrap();
            let handle = Persistent::Persistent(PersistentTpmHandle::new(SRK_HANDLE).unwrap());
            context.evict_control(Provision::Owner, srk.key_handle.into(), handle).unwrap();
            context.hierarchy_change_auth(AuthHandle::Owner, Auth::try_from(vec![0x0c; 32]).unwrap()).unwrap();
        });
    }

    /// Someone with the TPM before the box plants a storage key of their own
    /// at the storage root key's handle, one that may leave the TPM
    /// (fixedTPM and fixedParent clear: duplicable, its private half can be
    /// known outside); [`Swtpm::evict_persistent_srk`] takes it out again.
    pub fn plant_duplicable_srk(&self) {
        use tss_esapi::attributes::ObjectAttributesBuilder;
        use tss_esapi::handles::PersistentTpmHandle;
        use tss_esapi::interface_types::algorithm::PublicAlgorithm;
        use tss_esapi::interface_types::dynamic_handles::Persistent;
        use tss_esapi::interface_types::ecc::EccCurve;
        use tss_esapi::interface_types::resource_handles::{Hierarchy, Provision};
        use tss_esapi::structures::{EccPoint, PublicBuilder, PublicEccParametersBuilder, SymmetricDefinitionObject};
        let mut context = tss_esapi::Context::new(TctiNameConf::from_str(&self.tcti()).unwrap()).unwrap();
        let attributes = ObjectAttributesBuilder::new()
            .with_fixed_tpm(false)
            .with_fixed_parent(false)
            .with_sensitive_data_origin(true)
            .with_user_with_auth(true)
            .with_no_da(true)
            .with_restricted(true)
            .with_decrypt(true)
            .build()
            .unwrap();
        let template = PublicBuilder::new()
            .with_public_algorithm(PublicAlgorithm::Ecc)
            .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
            .with_object_attributes(attributes)
            .with_ecc_parameters(
                PublicEccParametersBuilder::new_restricted_decryption_key(
                    SymmetricDefinitionObject::AES_128_CFB,
                    EccCurve::NistP256,
                )
                .build()
                .unwrap(),
            )
            .with_ecc_unique_identifier(EccPoint::default())
            .build()
            .unwrap();
        context.execute_with_session(Some(AuthSession::Password), |context| {
            let parent = context
                .create_primary(Hierarchy::Owner, vault::storage_primary_template().unwrap(), None, None, None, None)
                .unwrap()
                .key_handle;
            let planted = context.create(parent, template, None, None, None, None).unwrap();
            let loaded = context.load(parent, planted.out_private, planted.out_public).unwrap();
            let handle = Persistent::Persistent(PersistentTpmHandle::new(SRK_HANDLE).unwrap());
            context.evict_control(Provision::Owner, loaded.into(), handle).unwrap();
        });
    }

    /// Removes whatever key is persistent at the storage root key's handle
    /// (the owner's authorisation still empty).
    pub fn evict_persistent_srk(&self) {
        use tss_esapi::handles::{PersistentTpmHandle, TpmHandle};
        use tss_esapi::interface_types::dynamic_handles::Persistent;
        use tss_esapi::interface_types::resource_handles::Provision;
        let mut context = tss_esapi::Context::new(TctiNameConf::from_str(&self.tcti()).unwrap()).unwrap();
        let handle = PersistentTpmHandle::new(SRK_HANDLE).unwrap();
        let object = context
            .execute_without_session(|context| context.tr_from_tpm_public(TpmHandle::Persistent(handle)))
            .unwrap();
        context.execute_with_session(Some(AuthSession::Password), |context| {
            context.evict_control(Provision::Owner, object, Persistent::Persistent(handle)).unwrap();
        });
    }
}

impl Drop for Swtpm {
    fn drop(&mut self) {
        self.stop();
    }
}
