# frozen_string_literal: true

# The application real Sidekiq processes load in the caps-inside-fair-queues specs: `fair` is a fair queue,
# `plain` is not. Jobs record start and finish in Redis (with their scope) so specs can count how many of a
# scope ran at once.
require "json"
require "logger"
require "active_support" # 7.x: before any of its parts (Notifications needs IsolatedExecutionState)
require "active_support/notifications"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
Sidekiq::FairTenant.configure do |c|
  c.fair_queues = %w[fair]
  c.sweep_interval = 0.3
end

require_relative "parent_watch"

module FairCapsApp
  EVENTS = "spec:caps:events"
  PARKED = "spec:caps:parked"

  def self.record(event, jid, scope, index)
    Sidekiq.redis do |conn|
      conn.call("RPUSH", EVENTS, JSON.generate("event" => event, "jid" => jid, "scope" => scope, "index" => index,
                                               "pid" => Process.pid,
                                               "at" => Process.clock_gettime(Process::CLOCK_REALTIME)))
    end
  end

  # Every job the server middleware parks (only jobs of queues that are not fair should ever be), in the server
  # processes only: the spec process loads this file for the job classes, and a subscription there would write
  # into the Redis of every later spec that parks a job.
  if Sidekiq.server?
    ActiveSupport::Notifications.subscribe("park.sidekiq_fair_tenant") do |*, payload|
      Sidekiq.redis { |conn| conn.call("RPUSH", PARKED, payload[:jid].to_s) }
    end
  end

  # args: tenant, index, sleep_ms; the scope is the tenant.
  module Perform
    def perform(tenant, index, sleep_ms = 0)
      FairCapsApp.record("start", jid, tenant, index)
      sleep(sleep_ms / 1000.0) if sleep_ms.positive?
      FairCapsApp.record("finish", jid, tenant, index)
    end
  end
end

class StaticCapJob
  include Sidekiq::Worker
  include FairCapsApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 2, lease: 2 }

  def self.fair_tenant(tenant, *) = tenant
end

class ElasticCapJob
  include Sidekiq::Worker
  include FairCapsApp::Perform

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 2, lease: 2, elastic: true }

  def self.fair_tenant(tenant, *) = tenant
end

class UncappedFairJob
  include Sidekiq::Worker
  include FairCapsApp::Perform

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant
end

# One slot per customer across tenants (the webhook case), on a fair queue. args: tenant, customer, index, sleep_ms
class CustomerCapJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 1, lease: 2, key: :customer_key }

  def self.fair_tenant(tenant, *) = tenant
  def self.customer_key(_tenant, customer, *) = "customer-#{customer}"

  def perform(tenant, customer, index, sleep_ms)
    FairCapsApp.record("start", jid, customer, "#{tenant}-#{index}")
    sleep(sleep_ms / 1000.0)
    FairCapsApp.record("finish", jid, customer, "#{tenant}-#{index}")
  end
end

# The same limit on a queue that is not fair: parked and handed over as before.
class PlainCapJob
  include Sidekiq::Worker
  include FairCapsApp::Perform

  sidekiq_options queue: "plain", retry: false, fair_tenant_concurrency: { limit: 1, lease: 2 }

  def self.fair_tenant(tenant, *) = tenant
end
