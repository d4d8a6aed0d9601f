//! Timings for the numbers the vault issue asks for, against swtpm:
//! unseal, first read (KDF included), cached read p50, rotation of N
//! secrets. `cargo bench -p clawos-vault`; N from
//! `CLAWOS_VAULT_BENCH_SECRETS` (default 100).

#[path = "../tests/common/mod.rs"]
#[allow(dead_code, reason = "the integration tests use the rest of the fixtures")]
mod common;

use std::time::{Duration, Instant};

use common::{config, operator, operator_policy, Swtpm};
use vault::{InitProtection, Vault};

fn percentile(samples: &mut [Duration], fraction: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * fraction) as usize]
}

fn main() {
    let secrets: usize =
        std::env::var("CLAWOS_VAULT_BENCH_SECRETS").ok().and_then(|text| text.parse().ok()).unwrap_or(100);
    let temp = tempfile::tempdir().unwrap();
    let Some(tpm) = Swtpm::start(&temp.path().join("tpm")) else {
        return;
    };
    let cfg = config(temp.path(), &tpm.tcti());
    let mut vault = Vault::init(cfg.clone(), InitProtection::Tpm, &operator()).unwrap().vault;
    vault.set_policy(operator_policy());
    for index in 0..secrets {
        vault.set(&operator(), &format!("secret-{index}"), b"value").unwrap();
    }
    vault.lock().unwrap();

    let started = Instant::now();
    let mut vault = Vault::open(cfg).unwrap();
    println!("unseal (TPM, master key not cached): {:?}", started.elapsed());
    vault.set_policy(operator_policy());

    let started = Instant::now();
    vault.get(&operator(), "secret-0").unwrap();
    println!("first read (PBKDF2 600k + AES-GCM + audit): {:?}", started.elapsed());

    let mut samples: Vec<Duration> = (0..200)
        .map(|_| {
            let started = Instant::now();
            vault.get(&operator(), "secret-0").unwrap();
            started.elapsed()
        })
        .collect();
    println!(
        "cached read: p50 {:?}, p99 {:?} (200 reads)",
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99)
    );

    let started = Instant::now();
    vault.rotate(&operator()).unwrap();
    println!("rotation of {secrets} secrets: {:?}", started.elapsed());
}
