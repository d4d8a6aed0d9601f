//! What the `http` capability decides about a tool's request before and
//! after it goes out (specs/toolhost/README.md, "HTTP"): where it goes
//! ([`Origin`], grants, public addresses only), which of the tool's headers
//! are sent, and how injected secrets are redacted from what comes back.
//! `imports` runs the request with these rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// What replaces a credential value found in a response.
pub const REDACTED: &str = "[REDACTED]";

/// How a request reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain text: anyone on the path reads and changes it.
    Http,
    /// TLS, the server's certificate verified for the URL's host.
    Https,
}

impl Scheme {
    /// `http` or `https`, as in a URL and in `credentials.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL without one means.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Where a request goes: scheme, host (lower case, a name or an IPv4
/// address) and port, always explicit. Grants compare its authority; a
/// credential rule compares all three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The origin of an `http://` or `https://` URL. User info, IPv6
    /// literals and port 0 are refused.
    pub fn of_url(url: &str) -> Result<Origin, String> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else {
            return Err(format!("{url:?}: only http:// and https:// URLs are supported"));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default().to_ascii_lowercase();
        if authority.is_empty() || authority.contains(['@', '[']) {
            return Err(format!("{url:?}: the URL needs a host name or IPv4 address and may not carry user info"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => match port.parse::<u16>() {
                Ok(port) if !host.is_empty() && port != 0 => (host.to_owned(), port),
                _ => return Err(format!("{url:?}: bad port")),
            },
            None => (authority, scheme.default_port()),
        };
        Ok(Origin { scheme, host, port })
    }

    /// `host:port`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Whether `grant` (`host` or `host:port`, from `network:outbound:`)
/// covers `authority` (`host:port`): a grant with a port covers exactly
/// that port, one without covers the web ports, 80 and 443.
pub(crate) fn authority_matches(grant: &str, authority: &str) -> bool {
    grant == authority
        || (!grant.contains(':') && (authority == format!("{grant}:80") || authority == format!("{grant}:443")))
}

/// Request headers the host sets itself and a tool's are dropped:
/// - `host`: a shared front end routes by it, so a tool's own would carry
///   an injected credential to another site than the granted one;
/// - `content-length`, `transfer-encoding`: the host frames the body; a
///   tool's framing that disagrees with it smuggles a second request;
/// - `connection`, `keep-alive`, `te`, `trailer`, `upgrade`,
///   `proxy-connection`: hop-by-hop, the connection is the host's;
/// - `proxy-authorization`: no proxy is used, nothing to authorize;
/// - `accept-encoding`: always `identity`, so a response is redacted in the
///   form the tool receives (see [`refused_coding`]).
///
/// The credential headers of the request are dropped too (`imports`), so a
/// tool cannot replace an injected credential with one of its own choosing.
const HOST_SET_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "proxy-authorization",
    "accept-encoding",
];

/// Whether a tool-set request header is sent.
pub(crate) fn tool_may_set(header: &str) -> bool {
    !HOST_SET_HEADERS.iter().any(|own| own.eq_ignore_ascii_case(header))
}

/// Why a response's `Content-Encoding` is refused, if it is: the host asked
/// for `identity` and redacts the bytes it hands over, which would not be
/// the bytes a tool decodes from a compressed body.
pub(crate) fn refused_coding(content_encoding: Option<&str>) -> Option<String> {
    let coding = content_encoding?.trim();
    (!coding.is_empty() && !coding.eq_ignore_ascii_case("identity"))
        .then(|| format!("the response is in content coding {coding:?}; the host asks for and accepts only identity, so it can redact what the tool gets"))
}

/// Whether `ip` is one a tool reaches only through a grant that names it
/// literally: this box and its neighbours (loopback, private, shared
/// address space, link-local, which holds cloud metadata services), and
/// addresses that are no single public host (unspecified, multicast,
/// broadcast, reserved). IPv6 forms of IPv4 addresses are judged as IPv4.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped().or_else(|| nat64(v6)) {
            Some(v4) => is_internal_v4(v4),
            None => {
                let first = v6.segments()[0];
                v6.is_unspecified()
                    || v6.is_loopback()
                    || v6.is_multicast()
                    || first & 0xfe00 == 0xfc00 // unique local fc00::/7
                    || first & 0xffc0 == 0xfe80 // link-local fe80::/10
                    || first & 0xffc0 == 0xfec0 // site-local fec0::/10 (deprecated, still routed by some)
            }
        },
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_unspecified()
        || a == 0 // "this network"
        || ip.is_loopback()
        || ip.is_private()
        || (a == 100 && (64..128).contains(&b)) // shared address space 100.64.0.0/10
        || ip.is_link_local()
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments 192.0.0.0/24
        || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18.0.0/15
        || ip.is_multicast()
        || a >= 240 // reserved and broadcast
}

/// The IPv4 address inside a well-known NAT64 address (64:ff9b::/96).
fn nat64(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0])
        .then(|| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
}

/// Resolves names as the system does, then keeps public addresses only. A
/// URL whose host is an address literal passes as is: the grant check has
/// already required a grant naming exactly that address. Resolving here,
/// in the connection, rather than before it, leaves no window for a name
/// to resolve to a public address at the check and a private one at the
/// connect.
#[derive(Debug, Default)]
struct PublicOnly(DefaultResolver);

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.0.resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        if host.parse::<IpAddr>().is_ok() {
            return Ok(resolved);
        }
        let mut public = self.empty();
        for address in resolved.iter().filter(|address| !is_internal(address.ip())) {
            public.push(*address);
        }
        if public.is_empty() {
            let addresses: Vec<String> = resolved.iter().map(|a| a.ip().to_string()).collect();
            let message = format!(
                "{host} resolves to {} only, an address of this box or its local network; a grant must name such an address literally",
                addresses.join(", ")
            );
            return Err(ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, message)));
        }
        Ok(public)
    }
}

/// An HTTP client for one request: no redirect (one could leave the granted
/// origin), no proxy from the environment, HTTPS verified against `tls`'s
/// roots, public addresses only for names ([`PublicOnly`]), the response
/// status handed to the tool rather than turned into an error.
pub(crate) fn agent(tls: &ureq::tls::TlsConfig, timeout: Duration) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .tls_config(tls.clone())
        .max_redirects(0)
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build();
    ureq::Agent::with_parts(config, DefaultConnector::default(), PublicOnly::default())
}

/// Shortest secret redacted in its encoded forms: the encodings of a
/// shorter one are too likely to occur in unrelated text. The secret itself
/// is always redacted.
const MIN_ENCODED_SECRET_BYTES: usize = 6;

/// Finds and replaces injected secrets in a response, as is and in every
/// encoding a server commonly echoes them in: base64 and base64url (at any
/// of the three alignments inside a longer value, as in HTTP Basic), hex in
/// either case, percent-encoding in either case, and JSON `\u` escapes.
/// This is defence in depth: the boundary is that a secret goes only to the
/// origin its rule names, over TLS unless the rule says otherwise.
pub(crate) struct Redactor {
    needles: Vec<Vec<u8>>,
}

impl Redactor {
    pub(crate) fn new(secrets: &[String]) -> Redactor {
        let mut needles = Vec::new();
        for secret in secrets.iter().map(String::as_bytes).filter(|s| !s.is_empty()) {
            needles.push(secret.to_vec());
            if secret.len() < MIN_ENCODED_SECRET_BYTES {
                continue;
            }
            needles.extend(base64_forms(secret));
            let hex = fsutil::hex(secret);
            needles.push(hex.to_ascii_uppercase().into_bytes());
            needles.push(hex.into_bytes());
            for upper in [false, true] {
                needles.push(percent_encoded(secret, upper, |b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)));
                needles.push(percent_encoded(secret, upper, |_| false));
            }
            if let Ok(text) = std::str::from_utf8(secret) {
                for upper in [false, true] {
                    needles.push(json_escaped(text, upper));
                }
            }
        }
        // Longest first, so a longer form is replaced whole before a form
        // it contains; duplicates (a secret with nothing to escape) once.
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Redactor { needles }
    }

    /// `text` with every needle replaced by [`REDACTED`].
    pub(crate) fn redact(&self, mut text: Vec<u8>) -> Vec<u8> {
        for needle in &self.needles {
            if !text.windows(needle.len()).any(|w| w == needle.as_slice()) {
                continue;
            }
            let mut out = Vec::with_capacity(text.len());
            let mut i = 0;
            while i < text.len() {
                if text[i..].starts_with(needle) {
                    out.extend_from_slice(REDACTED.as_bytes());
                    i += needle.len();
                } else {
                    out.push(text[i]);
                    i += 1;
                }
            }
            text = out;
        }
        text
    }
}

/// The base64 characters determined by `secret` alone, for each of the
/// three byte offsets it may start at inside a longer encoded value, in the
/// standard and the URL-safe alphabets. Character i of an encoding covers
/// bits 6i..6i+6; the ones kept lie wholly inside the secret's bits.
fn base64_forms(secret: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut forms = Vec::new();
    for offset in 0..3 {
        let mut shifted = vec![0; offset];
        shifted.extend_from_slice(secret);
        let (first_bit, end_bit) = (8 * offset, 8 * shifted.len());
        let first = first_bit.div_ceil(6);
        let end = end_bit / 6;
        for engine in
            [&base64::engine::general_purpose::STANDARD_NO_PAD, &base64::engine::general_purpose::URL_SAFE_NO_PAD]
        {
            let encoded = engine.encode(&shifted).into_bytes();
            forms.push(encoded[first..end].to_vec());
        }
    }
    forms
}

/// `secret` with every byte `keep` refuses written as `%XX`.
fn percent_encoded(secret: &[u8], upper: bool, keep: impl Fn(u8) -> bool) -> Vec<u8> {
    let mut out = String::new();
    for &b in secret {
        match (keep(b), upper) {
            (true, _) => out.push(b as char),
            (false, true) => out += &format!("%{b:02X}"),
            (false, false) => out += &format!("%{b:02x}"),
        }
    }
    out.into_bytes()
}

/// `text` with every character written as a JSON `\uXXXX` escape
/// (surrogate pairs beyond the BMP), as some serializers escape all
/// non-ASCII or all characters.
fn json_escaped(text: &str, upper: bool) -> Vec<u8> {
    let mut out = String::new();
    for unit in text.encode_utf16() {
        out += &if upper { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") };
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_grants() {
        let origin = |url| Origin::of_url(url).unwrap();
        assert_eq!(
            origin("http://example.com:8080/x?y"),
            Origin { scheme: Scheme::Http, host: "example.com".into(), port: 8080 }
        );
        assert_eq!(origin("http://Example.com/").authority(), "example.com:80");
        assert_eq!(
            origin("https://example.com#x"),
            Origin { scheme: Scheme::Https, host: "example.com".into(), port: 443 }
        );
        // The scheme is kept apart from the port: http to 443 is still http.
        assert_eq!(origin("http://api.example.com:443/").scheme, Scheme::Http);
        for bad in [
            "ftp://example.com/",
            "http://user@example.com/",
            "http:///x",
            "http://example.com:0/",
            "http://[::1]/",
            "file:///etc/shadow",
        ] {
            assert!(Origin::of_url(bad).is_err(), "{bad}");
        }
        assert!(authority_matches("example.com", "example.com:80"));
        assert!(authority_matches("example.com", "example.com:443"));
        assert!(!authority_matches("example.com", "example.com:81"));
        assert!(authority_matches("127.0.0.1:9000", "127.0.0.1:9000"));
        assert!(!authority_matches("127.0.0.1:9000", "127.0.0.1:80"));
        assert!(!authority_matches("example.com", "evil.example.com:443"));
    }

    #[test]
    fn internal_addresses() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn host_set_headers_are_not_the_tools() {
        for header in ["Host", "content-length", "Transfer-Encoding", "CONNECTION", "Accept-Encoding", "upgrade"] {
            assert!(!tool_may_set(header), "{header}");
        }
        assert!(tool_may_set("x-request-id") && tool_may_set("content-type") && tool_may_set("accept"));
        assert_eq!(refused_coding(None), None);
        assert_eq!(refused_coding(Some("identity")), None);
        assert!(refused_coding(Some("gzip")).unwrap().contains("\"gzip\""));
    }

    #[test]
    fn redact_replaces_every_occurrence_plain_and_encoded() {
        use base64::Engine as _;
        let secret = "s3cret/Key+9?é";
        let redactor = Redactor::new(&[secret.to_owned()]);
        let b64 = |engine: &base64::engine::GeneralPurpose, text: &str| engine.encode(text);
        let basic = format!("user:{secret}");
        let encoded = [
            secret.to_owned(),
            b64(&base64::engine::general_purpose::STANDARD, secret),
            b64(&base64::engine::general_purpose::URL_SAFE_NO_PAD, secret),
            // Inside a longer value, at another alignment: HTTP Basic.
            b64(&base64::engine::general_purpose::STANDARD, &basic),
            b64(&base64::engine::general_purpose::STANDARD, &format!("a{secret}")),
            fsutil::hex(secret.as_bytes()),
            fsutil::hex(secret.as_bytes()).to_ascii_uppercase(),
            "s3cret%2FKey%2B9%3F%C3%A9".to_owned(),
            "s3cret%2fKey%2b9%3f%c3%a9".to_owned(),
            secret.encode_utf16().map(|u| format!("\\u{u:04x}")).collect(),
            secret.encode_utf16().map(|u| format!("\\u{u:04X}")).collect(),
        ];
        for form in &encoded {
            let out = String::from_utf8(redactor.redact(format!("before {form} after").into_bytes())).unwrap();
            assert!(out.contains(REDACTED), "{form:?} not redacted: {out}");
            assert!(!out.contains("s3cret") && !out.contains(&fsutil::hex(b"s3cret")), "{form:?}: {out}");
        }
        // A short secret is redacted as is only.
        let short = Redactor::new(&["abc".to_owned()]);
        assert_eq!(short.redact(b"abc 616263".to_vec()), format!("{REDACTED} 616263").into_bytes());
    }
}
