//! The `service!` macro every component module is written with.

/// Defines one component's methods: for each, its doc, name, params type,
/// result type, default timeout and error codes. Generates `METHODS`, the
/// `Service` trait, `dispatch` and `Client` (see the crate docs).
macro_rules! service {
    (
        component: $component:expr;
        $(
            $(#[doc = $doc:literal])*
            fn $name:ident($params:ty) -> $result:ty { timeout_ms: $timeout:expr, errors: [$($error:ident),* $(,)?] $(,)? }
        )*
    ) => {
        #[allow(unused_imports)]
        use super::*;

        /// This component's methods.
        pub const METHODS: &[$crate::MethodInfo] = &[
            $($crate::MethodInfo {
                component: $component,
                name: stringify!($name),
                doc: concat!($($doc, "\n"),*),
                timeout: std::time::Duration::from_millis($timeout),
                errors: &[$(clawos_ipc::ErrorCode::$error),*],
                params_schema: $crate::schema::<$params>,
                result_schema: $crate::schema::<$result>,
            }),*
        ];

        /// What the component implements: one function per method.
        pub trait Service: Send + Sync {
            $(
                $(#[doc = $doc])*
                fn $name(
                    &self,
                    call: &$crate::Call,
                    params: $params,
                ) -> impl std::future::Future<Output = Result<$result, clawos_ipc::server::MethodError>> + Send;
            )*
        }

        /// Answers `request` if it names one of these methods, else `None`.
        #[allow(unused_variables)]
        pub async fn dispatch<S: Service>(
            service: &S,
            call: &$crate::Call,
            request: clawos_ipc::Request,
        ) -> Option<Result<clawos_ipc::Object, clawos_ipc::server::MethodError>> {
            let clawos_ipc::Request { method, params, .. } = request;
            match method.as_str() {
                $(stringify!($name) => Some(match $crate::parse::<$params>(&method, params) {
                    Ok(params) => match service.$name(call, params).await {
                        Ok(result) => $crate::encode(&result),
                        Err(error) => Err(error),
                    },
                    Err(error) => Err(error),
                }),)*
                _ => None,
            }
        }

        /// Typed calls to these methods over a connection to the component.
        #[derive(Clone, Copy)]
        pub struct Client<'a> {
            #[allow(dead_code)]
            ipc: &'a clawos_ipc::IpcClient,
            #[allow(dead_code)]
            timeout: Option<std::time::Duration>,
        }

        impl<'a> Client<'a> {
            /// Calls over `ipc`, each method with its own default timeout.
            pub fn new(ipc: &'a clawos_ipc::IpcClient) -> Self {
                Client { ipc, timeout: None }
            }

            /// Every call waits at most `timeout` instead of the method's default.
            pub fn with_timeout(self, timeout: std::time::Duration) -> Self {
                Client { timeout: Some(timeout), ..self }
            }

            $(
                $(#[doc = $doc])*
                pub async fn $name(&self, params: &$params) -> Result<$result, $crate::CallError> {
                    let timeout = self.timeout.unwrap_or(std::time::Duration::from_millis($timeout));
                    $crate::call(self.ipc, stringify!($name), timeout, params).await
                }
            )*
        }
    };
}
