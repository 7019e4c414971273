//! What this binary was built from, recorded by `build.rs` at compile time, so that a bug report can
//! name the exact binary it ran (`Sidekiq::FairTenant::Native.build_info`).

/// `(key, value)` pairs in the order `build_info` lists them.
pub const FACTS: [(&str, &str); 7] = [
    ("gem_version", env!("FAIR_TENANT_BUILD_GEM_VERSION")),
    // The Ruby whose headers and RbConfig the binary was compiled against: `RUBY_PROGRAM_VERSION`,
    // and `RbConfig::CONFIG["ruby_version"]`, the ABI version every Ruby of one minor version shares.
    ("ruby_version", env!("FAIR_TENANT_BUILD_RUBY_VERSION")),
    (
        "ruby_api_version",
        env!("FAIR_TENANT_BUILD_RUBY_API_VERSION"),
    ),
    ("ruby_arch", env!("FAIR_TENANT_BUILD_RUBY_ARCH")),
    ("target", env!("FAIR_TENANT_BUILD_TARGET")),
    ("rustc", env!("FAIR_TENANT_BUILD_RUSTC")),
    ("profile", env!("FAIR_TENANT_BUILD_PROFILE")),
];

/// The value recorded for `key`.
pub fn get(key: &str) -> Option<&'static str> {
    FACTS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(key: &str) -> &'static str {
        get(key).unwrap_or_else(|| panic!("no {key}"))
    }

    #[test]
    fn keys_are_unique_and_every_value_is_set() {
        for (i, (key, value)) in FACTS.iter().enumerate() {
            assert!(!value.is_empty(), "{key} is empty");
            assert!(!FACTS[..i].iter().any(|(k, _)| k == key), "{key} twice");
        }
        assert_eq!(get("nope"), None);
    }

    #[test]
    fn gem_version_is_the_one_in_version_rb() {
        let version_rb = include_str!("../../../lib/sidekiq/fair_tenant/version.rb");
        let line = format!("VERSION = \"{}\"", fact("gem_version"));
        assert!(version_rb.contains(&line), "{line} not in version.rb");
    }

    #[test]
    fn target_is_the_one_this_code_was_compiled_for() {
        let target = fact("target");
        assert!(target.starts_with(std::env::consts::ARCH), "{target}");
        assert!(target.contains(std::env::consts::OS), "{target}");
    }

    #[test]
    fn ruby_version_belongs_to_the_api_version() {
        // 3.1.7 against 3.1.0: the same major.minor.
        let minor = |v: &'static str| v.splitn(3, '.').take(2).collect::<Vec<_>>();
        let (version, api) = (fact("ruby_version"), fact("ruby_api_version"));
        assert_eq!(minor(version), minor(api), "{version} vs {api}");
        assert_eq!(minor(version).len(), 2, "{version}");
    }

    #[test]
    fn rustc_and_profile_look_like_what_cargo_reports() {
        assert!(fact("rustc").starts_with("rustc 1."), "{}", fact("rustc"));
        // cargo test builds with the debug profile; the gem's library with release.
        assert!(["debug", "release"].contains(&fact("profile")));
    }
}
