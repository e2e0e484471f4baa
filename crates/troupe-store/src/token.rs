//! Gateway bearer tokens: minted by the Lead for each teammate, handed to it
//! in a mode-0600 file, and kept in the store only as a SHA-256 hash bound to
//! the agent id ([`GatewayAccess`](crate::GatewayAccess)), so reading the
//! database never reveals a token that works.

use std::io::Read;

use sha2::{Digest, Sha256};

/// A fresh token: 32 bytes from the kernel's random source, as 64 hex digits.
pub fn mint() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex(&bytes))
}

/// The environment variable a teammate's gateway token travels in: from the
/// Lead to the teammate's engine, which hands it to the gateway it starts.
/// Never a file, which every teammate can read, nor a command line, which
/// every process can read. (A process of the same user can still read
/// `/proc/<pid>/environ`; Landlock did not refuse that across sandboxes on
/// the kernel measured, see issue 13's report.)
pub const ENV: &str = "TROUPE_GATEWAY_TOKEN";

/// The hash the store keeps for `token` (hex SHA-256).
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.trim().as_bytes()))
}

/// True when `token` hashes to `expected`, compared in constant time so the
/// time of a refusal says nothing about how much of the hash matched.
pub fn matches(token: &str, expected: &str) -> bool {
    let got = hash(token);
    got.len() == expected.len() && got.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_only_their_hash_matches() {
        let (a, b) = (mint().unwrap(), mint().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(matches(&a, &hash(&a)));
        assert!(matches(&format!("{a}\n"), &hash(&a)), "a trailing newline from a token file is not part of it");
        assert!(!matches(&b, &hash(&a)));
        assert!(!matches("", &hash(&a)));
        assert_eq!(hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
