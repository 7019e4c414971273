# frozen_string_literal: true

# The application real Sidekiq processes load in the rate-caps-inside-fair-queues specs: `fair` is a fair
# queue. Jobs record start and finish in Redis (with their tenant) so specs can count starts per window.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
Sidekiq::FairTenant.configure do |c|
  c.fair_queues = %w[fair]
  c.sweep_interval = 0.3
end

require_relative "parent_watch"

module FairRateApp
  EVENTS = "spec:rate:events"

  def self.record(event, jid, tenant, index)
    Sidekiq.redis do |conn|
      conn.call("RPUSH", EVENTS, JSON.generate("event" => event, "jid" => jid, "tenant" => tenant, "index" => index,
                                               "pid" => Process.pid,
                                               "at" => Process.clock_gettime(Process::CLOCK_REALTIME)))
    end
  end

  # args: tenant, index, sleep_ms
  module Perform
    def perform(tenant, index, sleep_ms = 0)
      FairRateApp.record("start", jid, tenant, index)
      sleep(sleep_ms / 1000.0) if sleep_ms.positive?
      FairRateApp.record("finish", jid, tenant, index)
    end
  end
end

# At most 5 starts a second per tenant.
class RateJob
  include Sidekiq::Worker
  include FairRateApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_rate: [{ limit: 5, per: 1 }]

  def self.fair_tenant(tenant, *) = tenant
end

# Two windows at once: 3 a second and 5 in 3 seconds.
class TwoWindowsJob
  include Sidekiq::Worker
  include FairRateApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_rate: [{ limit: 3, per: 1 }, { limit: 5, per: 3 }]

  def self.fair_tenant(tenant, *) = tenant
end

# 2 starts in 3 s; long jobs (a process killed while running them).
class SlowRateJob
  include Sidekiq::Worker
  include FairRateApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_rate: { limit: 2, per: 3 }

  def self.fair_tenant(tenant, *) = tenant
end

# A rate cap and a concurrency cap on one tenant.
class RateAndSlotJob
  include Sidekiq::Worker
  include FairRateApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_rate: [{ limit: 4, per: 1 }],
                  fair_tenant_concurrency: { limit: 1, lease: 5 }

  def self.fair_tenant(tenant, *) = tenant
end

class UncappedRateAppJob
  include Sidekiq::Worker
  include FairRateApp::Perform

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant
end
