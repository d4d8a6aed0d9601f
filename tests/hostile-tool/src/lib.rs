//! What the hostile test tools in `tests/tools` share. Each is a component
//! of its own (its own `wit_bindgen::generate!` and `export!`, so its own
//! world and exports); what they have in common is expanded into each.

/// The `describe` of a hostile tool's `impl Guest`: its package's name and
/// version, and an empty parameter schema (`{}`: the tests send what they
/// like). Expanded in the tool's crate, so `Descriptor` is its bindings' and
/// the name and version are its own.
#[macro_export]
macro_rules! describe {
    () => {
        fn describe() -> Descriptor {
            Descriptor {
                name: ::core::env!("CARGO_PKG_NAME").into(),
                version: ::core::env!("CARGO_PKG_VERSION").into(),
                params_schema: "{}".into(),
            }
        }
    };
}
