# frozen_string_literal: true

# The application real Sidekiq processes load in the slots specs. Jobs record start and finish
# events in Redis so specs can check concurrency, order and exactly-once execution.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
# A short read timeout (s), so a spec's stalled Redis loses replies.
if (timeout = ENV.fetch("SLOTS_REDIS_TIMEOUT", nil))
  Sidekiq.configure_server { |config| config.redis = { url: ENV.fetch("REDIS_URL"), network_timeout: Float(timeout) } }
end
Sidekiq::FairTenant.configure do |config|
  config.sweep_interval = 0.3
end

require_relative "parent_watch"

module SlotsApp
  EVENTS = "spec:events"

  def self.record(event, jid, args)
    Sidekiq.redis do |conn|
      conn.rpush(EVENTS, JSON.generate("event" => event, "jid" => jid, "tenant" => args[0], "index" => args[1],
                                       "at" => Process.clock_gettime(Process::CLOCK_REALTIME), "pid" => Process.pid))
    end
  end
end

# args: tenant, index, sleep_ms, fail_first_time
class SlotJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: 3, fair_tenant_concurrency: { limit: 2, lease: 2 }

  def self.fair_tenant(tenant, *) = tenant

  # Sidekiq passes JSON arguments positionally.
  def perform(tenant, index, sleep_ms, fail_first_time = false) # rubocop:disable Style/OptionalBooleanParameter
    SlotsApp.record("start", jid, [tenant, index])
    sleep(sleep_ms / 1000.0)
    if fail_first_time && Sidekiq.redis { |c| c.incr("spec:failed:#{jid}") } == 1
      SlotsApp.record("fail", jid, [tenant, index])
      raise "failing once on purpose"
    end
    SlotsApp.record("finish", jid, [tenant, index])
  end
end

# Pushes a re-routable job from inside the server: proves the client middleware is registered in
# configure_server too. Its queues are not processed by the spec servers.
class PushFromServerJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false

  def perform(tenant)
    RoutedElsewhereJob.set(fair_tenant: tenant).perform_async
  end
end

class RoutedElsewhereJob
  include Sidekiq::Worker

  sidekiq_options queue: "elsewhere", retry: false, fair_tenant_queues: [{ queue: "elsewhere_slow", threshold: 0 }]

  def perform; end
end

# One slot per tenant: the shard specs.
class OneSlotJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: 1, lease: 5 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index, sleep_ms)
    SlotsApp.record("start", jid, [tenant, index])
    sleep(sleep_ms / 1000.0)
    SlotsApp.record("finish", jid, [tenant, index])
  end
end

# One slot per customer, whatever the tenant: the webhook case.
class WebhookJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: 1, lease: 2, key: :webhook_key }

  def self.webhook_key(customer, *) = "customer-#{customer}"

  def perform(customer, index, sleep_ms)
    SlotsApp.record("start", jid, [customer, index])
    sleep(sleep_ms / 1000.0)
    SlotsApp.record("finish", jid, [customer, index])
  end
end

# Two classes sharing one scope (their tenant's jobs from "default") with different limits: each job is held to
# its own, whichever job frees the slot it is handed.
class WideJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: 3, lease: 5 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index, sleep_ms)
    SlotsApp.record("start", jid, [tenant, index])
    sleep(sleep_ms / 1000.0)
    SlotsApp.record("finish", jid, [tenant, index])
  end
end

class NarrowJob < WideJob
  sidekiq_options fair_tenant_concurrency: { limit: 1, lease: 5 }
end

# Records on a connection of its own with a long timeout: a spec stalls Sidekiq's Redis past Sidekiq's read
# timeout, and the record must not be what fails.
class StallJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: 1, lease: 5 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index)
    event = JSON.generate("event" => "start", "jid" => jid, "tenant" => tenant, "index" => index)
    StallJob.pool.with { |conn| conn.call("RPUSH", SlotsApp::EVENTS, event) }
  end

  def self.pool
    @pool ||= Sidekiq::RedisConnection.create(url: ENV.fetch("REDIS_URL"), network_timeout: 30, size: 10)
  end
end

# A scope with room (limit 10) and a lease far longer than any spec: a slot it holds after its job ended was not
# given back (Releases keeps such a slot for its thread's next acquire, a few ms at most).
class RoomyJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: 10, lease: 600 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index, sleep_ms)
    SlotsApp.record("start", jid, [tenant, index])
    sleep(sleep_ms / 1000.0)
    SlotsApp.record("finish", jid, [tenant, index])
  end
end
