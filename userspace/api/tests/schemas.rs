//! The API against what is checked in and shipped: the JSON Schemas in
//! `specs/ipc/schemas/methods/` are exactly the generated ones, every
//! method has object schemas whose params refuse unknown fields, and the
//! image's ACL grants only methods that exist.
//!
//! `CLAWOS_BLESS=1 cargo test -p clawos-api --test schemas` rewrites the
//! schema files from the types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clawos_ipc::{AccessPolicy, ComponentId};

fn repo() -> PathBuf {
    clawos_test_require::package_path("../..")
}

fn schema_dir() -> PathBuf {
    repo().join("specs/ipc/schemas/methods")
}

fn checked_in(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap_or_else(|e| panic!("{}: {e}", current.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                files.insert(relative, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn checked_in_schemas_equal_the_generated_ones() {
    let generated: BTreeMap<String, String> = clawos_api::schemas().into_iter().collect();
    let dir = schema_dir();
    if std::env::var_os("CLAWOS_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        for (relative, text) in &generated {
            let path = dir.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
        }
    }
    let on_disk = checked_in(&dir);
    let missing: Vec<_> = generated.keys().filter(|name| !on_disk.contains_key(*name)).collect();
    let stale: Vec<_> = on_disk.keys().filter(|name| !generated.contains_key(*name)).collect();
    let changed: Vec<_> = generated
        .iter()
        .filter(|(name, text)| on_disk.get(*name).is_some_and(|disk| disk != *text))
        .map(|(name, _)| name)
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty() && changed.is_empty(),
        "specs/ipc/schemas/methods differs from the API (regenerate with CLAWOS_BLESS=1): missing {missing:?}, not a method {stale:?}, changed {changed:?}"
    );
}

#[test]
fn every_method_has_a_schema_for_its_params_and_result() {
    let files: BTreeSet<String> = clawos_api::schemas().into_iter().map(|(name, _)| name).collect();
    let mut seen = BTreeSet::new();
    for method in clawos_api::all() {
        let dir = method.component.map_or("common", ComponentId::as_str);
        assert!(seen.insert((dir, method.name)), "{dir}/{} is defined twice", method.name);
        assert!(!method.doc.trim().is_empty(), "{dir}/{} has no doc", method.name);
        for kind in ["params", "result"] {
            assert!(
                files.contains(&format!("{dir}/{}.{kind}.json", method.name)),
                "{dir}/{} has no {kind} schema",
                method.name
            );
        }
        // The client sends the method's timeout as the request's timeout_ms,
        // which the request schema caps (specs/ipc/schemas/request.json).
        assert!(
            method.timeout <= clawos_ipc::timeouts::MAX_REQUEST_TIMEOUT,
            "{dir}/{}: a timeout of {:?} is more than a request may ask for",
            method.name,
            method.timeout
        );
        let params = (method.params_schema)();
        let result = (method.result_schema)();
        assert_eq!(
            params.get("type").and_then(|t| t.as_str()),
            Some("object"),
            "{dir}/{} params are not an object",
            method.name
        );
        assert_eq!(
            result.get("type").and_then(|t| t.as_str()),
            Some("object"),
            "{dir}/{} result is not an object",
            method.name
        );
        assert_eq!(
            params.get("additionalProperties").and_then(|a| a.as_bool()),
            Some(false),
            "{dir}/{} params accept unknown fields",
            method.name
        );
    }
}

#[test]
fn a_component_overrides_a_common_method_only_on_purpose() {
    let common: BTreeSet<&str> = clawos_api::common::METHODS.iter().map(|m| m.name).collect();
    for component in ComponentId::ALL {
        for method in clawos_api::own_methods(component) {
            if common.contains(method.name) {
                // observability answers get_metrics for every component,
                // ebpf-agent adds its programs' statistics to its own.
                assert!(
                    method.name == "get_metrics"
                        && matches!(component, ComponentId::Observability | ComponentId::EbpfAgent),
                    "{component} redefines common method {}",
                    method.name
                );
            }
        }
    }
    assert_eq!(clawos_api::method(ComponentId::Router, "ping").unwrap().component, None);
    assert_eq!(
        clawos_api::method(ComponentId::EbpfAgent, "get_metrics").unwrap().component,
        Some(ComponentId::EbpfAgent)
    );
    assert!(clawos_api::method(ComponentId::Router, "route_message").is_none());
}

#[test]
fn the_shipped_acl_grants_only_methods_that_exist() {
    let path = repo().join("rootfs-overlay/etc/clawos/ipc-acl.toml");
    let policy = AccessPolicy::load(&path).unwrap();
    clawos_api::verify_acl(&policy).unwrap();
}

/// The Rust sources a component's daemon is built from: its crate and the
/// workspace crates it depends on, but for the IPC layers (`ipc`, `api`),
/// which name every method without calling it.
fn sources_of(component: &str) -> Vec<PathBuf> {
    let userspace = repo().join("userspace");
    let (mut crates, mut pending) = (BTreeSet::new(), vec![userspace.join(component)]);
    while let Some(dir) = pending.pop() {
        if !crates.insert(dir.clone()) {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let manifest: toml::Table = toml::from_str(&manifest).unwrap();
        let dependencies = manifest.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
        for dependency in dependencies.values() {
            if let Some(path) = dependency.get("path").and_then(|p| p.as_str()) {
                let path = dir.join(path).canonicalize().unwrap();
                if !path.ends_with("ipc") && !path.ends_with("api") {
                    pending.push(path);
                }
            }
        }
    }
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> = crates.iter().map(|dir| dir.join("src")).collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn the_shipped_acl_grants_only_what_its_senders_call() {
    // A grant a component never uses is reach an attacker who takes the
    // component over gets for free: every method granted to a named
    // sender is called somewhere in its sources, through its typed client
    // (`.memory_store(`) or by name (`"memory_store"`).
    let path = repo().join("rootfs-overlay/etc/clawos/ipc-acl.toml");
    let acl: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut unused = Vec::new();
    for rule in acl["allow"].as_array().unwrap() {
        let names = |key: &str| -> Vec<String> {
            rule[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
        };
        for sender in names("senders").iter().filter(|s| *s != "*" && *s != "operator") {
            let sources: String =
                sources_of(sender).iter().map(|file| std::fs::read_to_string(file).unwrap()).collect();
            for method in names("methods").iter().filter(|m| *m != "*") {
                if !sources.contains(&format!(".{method}(")) && !sources.contains(&format!("\"{method}\"")) {
                    unused.push(format!("{sender} → {:?}: {method}", names("recipients")));
                }
            }
        }
    }
    assert!(unused.is_empty(), "granted, never called:\n{}", unused.join("\n"));
}

#[test]
fn an_acl_rule_for_a_method_nobody_serves_is_refused() {
    let policy = |rule: &str| AccessPolicy::parse(&format!("[[allow]]\n{rule}"), "test policy").unwrap();
    for (rule, named) in [
        (
            "senders = [\"agent-loop\"]\nrecipients = [\"ebpf-agent\"]\nmethods = [\"check_policy\"]",
            "`check_policy` is not a method of `ebpf-agent`",
        ),
        (
            "senders = [\"*\"]\nrecipients = [\"ebpf-agent\"]\nmethods = [\"subscribe_events\"]",
            "`subscribe_events` is not a method of `ebpf-agent`",
        ),
        (
            "senders = [\"*\"]\nrecipients = [\"*\"]\nmethods = [\"route_message\"]",
            "`route_message` is not a method of any component",
        ),
        // Both recipients must serve it: fs-engine does, wasm-daemon does not.
        (
            "senders = [\"*\"]\nrecipients = [\"fs-engine\", \"wasm-daemon\"]\nmethods = [\"memory_search\"]",
            "`memory_search` is not a method of `wasm-daemon`",
        ),
    ] {
        let error = clawos_api::verify_acl(&policy(rule)).unwrap_err();
        assert!(error.contains(named), "{error}");
    }
    for rule in [
        "senders = [\"*\"]\nrecipients = [\"*\"]\nmethods = [\"*\"]",
        "senders = [\"*\"]\nrecipients = [\"scheduler\"]\nmethods = [\"ping\"]",
        "senders = [\"operator\"]\nrecipients = [\"*\"]\nmethods = [\"execute_tool\"]",
    ] {
        clawos_api::verify_acl(&policy(rule)).unwrap();
    }
}

#[test]
fn params_refuse_unknown_fields_with_the_field_named() {
    let mut params = clawos_ipc::Object::new();
    params.insert("tool_name".into(), "text-stats".into());
    params.insert("agent_id".into(), "wasm-agent".into());
    let error = clawos_api::parse::<clawos_api::wasm_daemon::ExecuteTool>("execute_tool", params).unwrap_err();
    assert_eq!(error.code, clawos_ipc::ErrorCode::Eproto);
    assert!(error.message.contains("agent_id"), "{}", error.message);
}
