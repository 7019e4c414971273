# frozen_string_literal: true

require "rake/extensiontask"

# Share the workspace's target/ with plain cargo commands so rebuilds are incremental; extconf.rb keeps a
# CARGO_TARGET_DIR it was given instead of deleting it after `make install`.
ENV["CARGO_TARGET_DIR"] = File.expand_path("../target", __dir__) if ENV.fetch("CARGO_TARGET_DIR", "").empty?

Rake::ExtensionTask.new("fair_tenant_rs") do |ext|
  ext.ext_dir = "ext/fair_tenant_rs"
  ext.lib_dir = "lib/sidekiq/fair_tenant"
  ext.source_pattern = "{**/*.rs,**/*.lua,Cargo.toml}"
end
