//! Tenant names as the gem stores them: a name of at most [`TENANT_MAX_BYTES`] bytes as it is; a longer one (a
//! `fair_tenant` that returned a payload by mistake) as a readable prefix cut on a character boundary,
//! [`TENANT_DIGEST_SEPARATOR`] and the SHA-1 of the whole name in hex. Every structure that names a tenant
//! (routing counters and index, slots, rate caps, fair queues, weights, stats) gets the same short name, so the
//! job still runs fairly (a tenant refused would have to run somewhere anyway) and no key holds the long one.

use crate::names::{TENANT_DIGEST_SEPARATOR, TENANT_MAX_BYTES};

const DIGEST_HEX: usize = 40;

/// The most bytes of the name kept before the separator and the digest.
pub const PREFIX_MAX: usize =
    TENANT_MAX_BYTES as usize - TENANT_DIGEST_SEPARATOR.len() - DIGEST_HEX;

/// The stored form of a tenant name longer than [`TENANT_MAX_BYTES`]; `None` for one that is kept as it is.
/// The result is valid UTF-8 whatever the name's bytes (the prefix stops before the first byte that is not),
/// and is itself short enough to be kept as it is.
pub fn short_tenant(name: &[u8]) -> Option<String> {
    if name.len() as u64 <= TENANT_MAX_BYTES {
        return None;
    }
    let head = &name[..PREFIX_MAX];
    let prefix = match std::str::from_utf8(head) {
        Ok(s) => s,
        // SAFETY-free: `valid_up_to` bytes are valid UTF-8.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
    };
    let digest = sha1_smol::Sha1::from(name).digest().to_string();
    Some(format!("{prefix}{TENANT_DIGEST_SEPARATOR}{digest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_up_to_the_maximum_is_kept() {
        assert_eq!(short_tenant(b"acme"), None);
        assert_eq!(short_tenant(&[b'a'; 256]), None);
    }

    #[test]
    fn a_longer_name_is_a_prefix_and_the_digest_of_the_whole() {
        let name = "a".repeat(300);
        let short = short_tenant(name.as_bytes()).unwrap();
        assert_eq!(short.len(), 256);
        assert!(short.starts_with(&"a".repeat(PREFIX_MAX)));
        let digest = sha1_smol::Sha1::from(name.as_bytes()).digest().to_string();
        assert!(short.ends_with(&format!("~sha1:{digest}")), "{short}");
        assert_eq!(
            short_tenant(short.as_bytes()),
            None,
            "stable when given again"
        );
        let other = short_tenant(format!("{name}b").as_bytes()).unwrap();
        assert_ne!(short, other, "names that share the prefix stay apart");
    }

    #[test]
    fn the_prefix_is_cut_on_a_character_boundary() {
        let name = "é".repeat(500_000);
        let short = short_tenant(name.as_bytes()).unwrap();
        assert!(short.len() <= 256);
        let (prefix, _) = short.split_once(TENANT_DIGEST_SEPARATOR).unwrap();
        assert!(prefix.chars().all(|c| c == 'é'));
        assert_eq!(prefix.len(), PREFIX_MAX / 2 * 2);
    }

    #[test]
    fn bytes_that_are_not_utf8_give_a_utf8_name() {
        let mut name = b"acme".to_vec();
        name.push(0xff);
        name.extend(std::iter::repeat_n(b'x', 400));
        let short = short_tenant(&name).unwrap();
        assert!(short.starts_with("acme~sha1:"), "{short}");
    }
}
