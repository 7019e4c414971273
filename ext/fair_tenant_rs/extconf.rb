# frozen_string_literal: true

# Builds the Rust extension. With the rb_sys gem present its Makefile generator is used; without it
# (offline Debian machines), a small Makefile runs cargo directly. Either way the result is installed as
# sidekiq/fair_tenant/fair_tenant_rs.<DLEXT> under sitearchdir, which RubyGems and rake-compiler redirect.

begin
  require "rb_sys/mkmf"
rescue LoadError
  nil
end

if defined?(RbSys)
  create_rust_makefile("sidekiq/fair_tenant/fair_tenant_rs")
  return
end

require "rbconfig"

def find_cargo
  return ENV["CARGO"] if ENV["CARGO"] && File.executable?(ENV["CARGO"])

  dirs = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR) + [File.join(Dir.home, ".cargo", "bin")]
  dirs.map { |dir| File.join(dir, "cargo#{RbConfig::CONFIG["EXEEXT"]}") }.find { |path| File.executable?(path) } ||
    abort("cargo not found: install Rust (https://rustup.rs) or set CARGO to the cargo executable")
end

def cargo_artifact(name)
  case RbConfig::CONFIG["host_os"]
  when /darwin/ then "lib#{name}.dylib"
  when /mingw|mswin|cygwin/ then "#{name}.dll"
  else "lib#{name}.so"
  end
end

crate_name = "fair_tenant_rs"
crate_dir = __dir__
workspace_manifest = File.expand_path("../../Cargo.toml", crate_dir)
# The crate is a member of the top-level workspace, whose Cargo.lock is the one --locked checks.
manifest = File.exist?(workspace_manifest) ? workspace_manifest : File.join(crate_dir, "Cargo.toml")
locked = File.exist?(File.join(File.dirname(manifest), "Cargo.lock")) ? "--locked" : ""

# A CARGO_TARGET_DIR from the environment is shared (rake compile reuses the workspace's target/) and kept;
# the default one lives in the build directory and is deleted after install so the gem does not carry it.
shared_target = ENV.fetch("CARGO_TARGET_DIR", "") != ""
target_dir = shared_target ? File.expand_path(ENV.fetch("CARGO_TARGET_DIR")) : File.join(Dir.pwd, "target")
dlext = RbConfig::CONFIG["DLEXT"]
sitearchdir = RbConfig::CONFIG["sitearchdir"]
remove_target = shared_target ? "" : "rm -rf \"$(CARGO_TARGET_DIR)\""
sources = Dir.glob("{**/*.rs,**/*.lua,Cargo.toml}", base: crate_dir).reject { |f| f.start_with?("target/") }
sources = sources.map { |f| File.join(crate_dir, f) } + Dir[File.join(File.dirname(manifest), "Cargo.{toml,lock}")]

File.write("Makefile", <<~MAKEFILE)
  SHELL = /bin/sh
  RUBY = #{RbConfig.ruby}
  CARGO = #{find_cargo}
  CARGO_MANIFEST = #{manifest}
  CARGO_TARGET_DIR = #{target_dir}
  CARGO_FLAGS = --release #{locked} --manifest-path "$(CARGO_MANIFEST)" -p #{crate_name}
  CARGO_ARTIFACT = $(CARGO_TARGET_DIR)/release/#{cargo_artifact(crate_name)}
  DLLIB = #{crate_name}.#{dlext}
  DESTDIR =
  sitearchdir = #{sitearchdir}
  target_prefix = /sidekiq/fair_tenant
  SOURCES = #{sources.sort.uniq.join(" \\\n  ")}

  all: $(DLLIB)

  $(DLLIB): $(SOURCES)
  \tenv RUBY="$(RUBY)" CARGO_TARGET_DIR="$(CARGO_TARGET_DIR)" "$(CARGO)" build $(CARGO_FLAGS)
  \tcp "$(CARGO_ARTIFACT)" $(DLLIB)

  install: $(DLLIB)
  \tmkdir -p "$(DESTDIR)$(sitearchdir)$(target_prefix)"
  \tcp $(DLLIB) "$(DESTDIR)$(sitearchdir)$(target_prefix)/$(DLLIB)"
  \t#{remove_target}

  clean:
  \trm -f $(DLLIB)

  distclean: clean
  \t#{remove_target}
  \trm -f Makefile

  .PHONY: all install clean distclean
MAKEFILE
