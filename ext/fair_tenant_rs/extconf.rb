# frozen_string_literal: true

# Builds the Rust extension. With the rb_sys gem present its Makefile generator is used (the ecosystem's way,
# as wasmtime-rb and tokenizers build); without it (Debian 12, which does not package it), or with
# FAIR_TENANT_BUILD=cargo, a small Makefile runs cargo directly. It says which. Either way the result is installed as
# sidekiq/fair_tenant/fair_tenant_rs.<DLEXT> under sitearchdir, which RubyGems and rake-compiler redirect.

unless ENV["FAIR_TENANT_BUILD"] == "cargo"
  begin
    require "mkmf" # rb_sys/mkmf builds on mkmf's helpers (dummy_makefile)
    require "rb_sys/mkmf"
  rescue LoadError
    nil
  end
end

if defined?(RbSys)
  puts "sidekiq-fair_tenant-rs: building with rb_sys #{Gem.loaded_specs["rb_sys"]&.version} (create_rust_makefile)"
  create_rust_makefile("sidekiq/fair_tenant/fair_tenant_rs") do |r|
    r.profile = ENV.fetch("RB_SYS_CARGO_PROFILE", :release).to_sym
    r.features = ENV.fetch("RB_SYS_CARGO_FEATURES", "").split(",") # rakelib/compile.rake: `bench` in a checkout
    r.clean_after_install = true # no cargo build output left in the installed gem: the whole target/ goes
    r.rubygems_clean_dirs = ["./target", "./cargo-vendor"]
    r.auto_install_rust_toolchain = false # a missing cargo is an error that says so, not a download
  end
  return
end
puts "sidekiq-fair_tenant-rs: building with cargo through its own Makefile (no rb_sys gem)"

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
File.write("Makefile", <<~MAKEFILE)
  SHELL = /bin/sh
  RUBY = #{RbConfig.ruby}
  CARGO = #{find_cargo}
  CARGO_MANIFEST = #{manifest}
  CARGO_TARGET_DIR = #{target_dir}
  # Cargo features, comma-separated, read when make runs (rb_sys reads the same variable).
  RB_SYS_CARGO_FEATURES ?=
  CARGO_FLAGS = --release #{locked} --manifest-path "$(CARGO_MANIFEST)" -p #{crate_name} $(if $(RB_SYS_CARGO_FEATURES),--features "$(RB_SYS_CARGO_FEATURES)")
  CARGO_ARTIFACT = $(CARGO_TARGET_DIR)/release/#{cargo_artifact(crate_name)}
  DLLIB = #{crate_name}.#{dlext}
  DESTDIR =
  sitearchdir = #{sitearchdir}
  target_prefix = /sidekiq/fair_tenant
  INSTALLED = $(DESTDIR)$(sitearchdir)$(target_prefix)/$(DLLIB)

  all: $(DLLIB)

  # Cargo decides what to rebuild (a build with nothing to do takes a fraction of a second), so
  # every source it knows, Lua scripts included, is picked up. A changed library replaces the old
  # one by rename, never by writing into it: a process that has it loaded keeps its own copy.
  $(DLLIB): FORCE
  	env RUBY="$(RUBY)" CARGO_TARGET_DIR="$(CARGO_TARGET_DIR)" "$(CARGO)" build $(CARGO_FLAGS)
  	cmp -s "$(CARGO_ARTIFACT)" $(DLLIB) || { cp "$(CARGO_ARTIFACT)" $(DLLIB).tmp && mv -f $(DLLIB).tmp $(DLLIB); }

  install: $(DLLIB)
  	mkdir -p "$(DESTDIR)$(sitearchdir)$(target_prefix)"
  	cmp -s $(DLLIB) "$(INSTALLED)" || { cp $(DLLIB) "$(INSTALLED).tmp" && mv -f "$(INSTALLED).tmp" "$(INSTALLED)"; }
  	#{remove_target}

  clean:
  	rm -f $(DLLIB) $(DLLIB).tmp

  distclean: clean
  	#{remove_target}
  	rm -f Makefile

  FORCE:

  .PHONY: all install clean distclean FORCE
MAKEFILE
