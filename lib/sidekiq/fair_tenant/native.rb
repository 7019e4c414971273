# frozen_string_literal: true

begin
  # Precompiled (platform) gems ship one extension per Ruby minor version under
  # lib/sidekiq/fair_tenant/<major.minor>/; try that first.
  require "sidekiq/fair_tenant/#{RUBY_VERSION[/\d+\.\d+/]}/fair_tenant_rs"
rescue LoadError
  # Fall back to the extension compiled at install time (or by `rake compile`). Plain `require`, not
  # `require_relative`: RubyGems puts a source gem's compiled extension in its extension_dir, which is on
  # the load path but not next to this file.
  require "sidekiq/fair_tenant/fair_tenant_rs"
end
