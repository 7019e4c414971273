# frozen_string_literal: true

# The application real Sidekiq processes load in the fair fetch specs: `fair` is a fair queue, `plain`
# is not. Jobs record when they start (and finish) in Redis, so specs can check order and shares.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN
  # FAIR_APP_PLAIN=1: no fair queues, so the process runs Sidekiq's own BasicFetch.
  Sidekiq::FairTenant.configure { |c| c.fair_queues = ENV["FAIR_APP_PLAIN"] ? [] : %w[fair] }
end

require_relative "parent_watch"

module FairApp
  EVENTS = "spec:fair:events"

  def self.record(event, jid, queue, tenant, index)
    Sidekiq.redis do |conn|
      conn.call("RPUSH", EVENTS, JSON.generate("event" => event, "jid" => jid, "queue" => queue, "tenant" => tenant,
                                               "index" => index, "pid" => Process.pid,
                                               "at" => Process.clock_gettime(Process::CLOCK_REALTIME)))
    end
  end
end

# args: tenant, index, sleep_ms
class FairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: 3

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index, sleep_ms = 0)
    FairApp.record("start", jid, "fair", tenant, index)
    sleep(sleep_ms / 1000.0) if sleep_ms.positive?
    FairApp.record("finish", jid, "fair", tenant, index)
  end
end

class PlainQueueJob
  include Sidekiq::Worker

  sidekiq_options queue: "plain", retry: false

  def perform(index)
    FairApp.record("start", jid, "plain", nil, index)
  end
end
