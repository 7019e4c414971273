# frozen_string_literal: true

require_relative "lib/sidekiq/fair_tenant/version"

Gem::Specification.new do |spec|
  spec.name = "sidekiq-fair_tenant-rs"
  spec.version = Sidekiq::FairTenant::VERSION
  spec.authors = ["sidekiq-fair_tenant-rs authors"]
  spec.license = "MIT"

  spec.summary = "Fair multi-tenant job processing for Sidekiq, with a Rust core"
  spec.description = <<~DESC.tr("\n", " ").strip
    Keeps one greedy tenant from starving the others in a shared Sidekiq deployment: jobs of tenants that
    enqueue more than a configured rate are re-routed to slower queues, and per-tenant concurrency slots cap
    how many of a tenant's jobs run at once. Counting and slot bookkeeping run as Redis Lua scripts driven
    from a native extension written in Rust.
  DESC

  spec.required_ruby_version = ">= 3.0"
  spec.metadata["rubygems_mfa_required"] = "true"

  spec.files = Dir[
    "lib/**/*.rb", "lib/**/*.erb", "lib/**/*.js",
    "ext/**/{*.rs,*.lua,*.rb,Cargo.toml,build.rs}",
    "Cargo.toml", "Cargo.lock",
    "README.md", "CHANGELOG.md", "LICENSE.txt", "docs/*.md",
    "exe/*"
  ].reject { |path| path.include?("/target/") }
  spec.bindir = "exe"
  spec.executables = spec.files.grep(%r{\Aexe/}) { |path| File.basename(path) }
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/fair_tenant_rs/extconf.rb"]

  spec.add_dependency "sidekiq", ">= 6.4", "< 9"
  # The source gem compiles at install (the x86_64-linux gem carries compiled libraries). The rb_sys gem is
  # used when installed, not needed: extconf.rb falls back to running cargo itself.
  spec.requirements << "to compile the source gem: Rust >= 1.88 (cargo) and libclang"
end
