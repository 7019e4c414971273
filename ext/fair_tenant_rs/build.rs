//! Configures the Ruby link (rb-sys) and records what this binary is built from, for
//! `Sidekiq::FairTenant::Native.build_info` (`src/build_info.rs` reads the values with `env!`).

use std::{env, error::Error, fs, path::Path, process::Command};

/// The gem's version constant, relative to this crate (the same layout in the repository and in an installed gem).
const VERSION_RB: &str = "../../lib/sidekiq/fair_tenant/version.rb";

fn main() -> Result<(), Box<dyn Error>> {
    let rb_env = rb_sys_env::activate()?;
    let rbconfig = |key: &str| -> Result<String, Box<dyn Error>> {
        println!("cargo:rerun-if-env-changed=DEP_RB_RBCONFIG_{key}");
        rb_env
            .get_rbconfig_value(key)
            .map(str::to_owned)
            .ok_or_else(|| format!("rb-sys reported no RbConfig::CONFIG value for {key}").into())
    };
    record("RUBY_VERSION", &rbconfig("RUBY_PROGRAM_VERSION")?);
    record("RUBY_API_VERSION", &rbconfig("RUBY_VERSION")?);
    record("RUBY_ARCH", &rbconfig("ARCH")?);
    record("GEM_VERSION", &gem_version()?);
    record("RUSTC", &rustc_version()?);
    record("TARGET", &env::var("TARGET")?);
    record("PROFILE", &env::var("PROFILE")?);
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={VERSION_RB}");
    Ok(())
}

fn record(name: &str, value: &str) {
    println!("cargo:rustc-env=FAIR_TENANT_BUILD_{name}={value}");
}

/// `VERSION = "x.y.z"` from lib/sidekiq/fair_tenant/version.rb.
fn gem_version() -> Result<String, Box<dyn Error>> {
    let path = Path::new(&env::var("CARGO_MANIFEST_DIR")?).join(VERSION_RB);
    let source = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("VERSION = \""))
        .find_map(|rest| rest.split_once('"').map(|(version, _)| version.to_owned()))
        .ok_or_else(|| format!("{}: no VERSION = \"...\" line", path.display()).into())
}

/// `rustc --version` of the compiler cargo builds this crate with.
fn rustc_version() -> Result<String, Box<dyn Error>> {
    let rustc = env::var("RUSTC")?;
    let output = Command::new(&rustc).arg("--version").output()?;
    if !output.status.success() {
        return Err(format!("{rustc} --version failed").into());
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}
