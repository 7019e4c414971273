# frozen_string_literal: true

# What rakelib/package_smoke.rb pushes and its `sidekiq` process (-r this file) runs: `fair` is a fair queue, and
# the job records that it ran and which extension its process loaded.
require "sidekiq-fair_tenant-rs"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }

class PackageSmokeFairJob
  include Sidekiq::Worker

  RAN = "package_smoke:ran"

  sidekiq_options queue: "fair"

  def self.fair_tenant(tenant) = tenant

  def perform(tenant)
    native = $LOADED_FEATURES.grep(%r{/fair_tenant_rs\.#{RbConfig::CONFIG["DLEXT"]}\z}).first
    Sidekiq.redis { |conn| conn.call("RPUSH", RAN, "#{tenant} #{native}") }
  end
end
