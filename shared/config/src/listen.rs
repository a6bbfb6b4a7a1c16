//! Listen addresses: `host:port`, where the host is an IP address or a name resolved once,
//! at start (`localhost:8080`, `[::1]:8080`, `0.0.0.0:8080`).

use std::net::{SocketAddr, ToSocketAddrs};

use serde::{Deserialize, Deserializer};

/// Parses a listen address; a host name is resolved to its first address, IPv4 first (so
/// `localhost` is 127.0.0.1 where it has both).
pub fn parse(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "{text:?} is not an address: expected host:port, e.g. 127.0.0.1:8080 or localhost:8080"
        ));
    };
    if host.is_empty() {
        return Err(format!("{text:?} names no host: e.g. 127.0.0.1:{port}"));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "{text:?}: the port {port:?} is not a number from 0 to 65535"
        ));
    }
    let mut addresses: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("{text:?}: cannot resolve {host:?}: {e}"))?
        .collect();
    addresses.sort_by_key(|a| !a.is_ipv4());
    addresses
        .into_iter()
        .next()
        .ok_or_else(|| format!("{text:?}: {host:?} resolves to no address"))
}

/// `#[serde(deserialize_with = "casement_config::listen::deserialize")]` for a
/// `SocketAddr` setting.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn addresses_and_host_names() {
        assert_eq!(
            parse("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert_eq!(parse("[::1]:9"), Ok("[::1]:9".parse().unwrap()));
        // `localhost` resolves without a network (the hosts file, or the resolver's rule).
        let local = parse("localhost:8080").expect("localhost resolves");
        assert!(local.ip().is_loopback() && local.port() == 8080, "{local}");
        assert!(
            parse("localhost")
                .unwrap_err()
                .contains("expected host:port")
        );
        assert!(
            parse("localhost:http")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse(":8080").unwrap_err().contains("names no host"));
    }
}
