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
  # The scheduled and retry pollers look every ~0.5 s instead of ~5 s.
  (config.respond_to?(:options) ? config.options : config)[:average_scheduled_poll_interval] = 0.5
  # FAIR_APP_OTHER_FETCH=1: another fetch strategy is configured (as Sidekiq Pro's super_fetch would be).
  if ENV["FAIR_APP_OTHER_FETCH"]
    other = Class.new(Sidekiq::BasicFetch)
    Object.const_set(:OtherFetch, other)
    if config.respond_to?(:options)
      config.options[:fetch] = other.new(config.options)
    else
      config[:fetch_class] = other
    end
  end
  # FAIR_APP_CAPSULE=1 (Sidekiq 7+): a second capsule, "second", of 2 threads on the fair queue fair2.
  if ENV["FAIR_APP_CAPSULE"]
    config.capsule("second") do |capsule|
      capsule.concurrency = 2
      capsule.queues = %w[fair2]
    end
  end
  # FAIR_APP_PLAIN=1: no fair queues, so the process runs Sidekiq's own BasicFetch.
  fair_queues = ENV["FAIR_APP_CAPSULE"] ? %w[fair fair2] : %w[fair]
  # FAIR_APP_MODE=time: `fair` shares its workers by worker time.
  fair_queues = [{ "fair" => ENV["FAIR_APP_MODE"] }] if ENV["FAIR_APP_MODE"]
  Sidekiq::FairTenant.configure { |c| c.fair_queues = ENV["FAIR_APP_PLAIN"] ? [] : fair_queues }
  # FAIR_APP_NETWORK_TIMEOUT=s: Sidekiq's Redis read timeout (a Redis busy for longer makes the client send the
  # call again). FAIR_APP_AUDIT_SECONDS=s: the process audits its in-flight list every s seconds.
  config.redis = { url: ENV.fetch("REDIS_URL"), network_timeout: Float(ENV["FAIR_APP_NETWORK_TIMEOUT"]) } if
    ENV["FAIR_APP_NETWORK_TIMEOUT"]
  Sidekiq::FairTenant::FairFetch::Audit.every = ENV["FAIR_APP_AUDIT_SECONDS"] if ENV["FAIR_APP_AUDIT_SECONDS"]
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

# A job that fails its first run (Sidekiq retries it after 1 s): the retry comes back through the poller.
class FlakyFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: 2
  sidekiq_retry_in { 1 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index)
    FairApp.record("start", jid, "fair", tenant, index)
    raise "failing once on purpose" if Sidekiq.redis { |c| c.call("INCR", "spec:fair:flaky:#{jid}") } == 1

    FairApp.record("finish", jid, "fair", tenant, index)
  end
end

# Two at a time per tenant, on a fair queue.
class CappedFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 2, lease: 5 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index, sleep_ms)
    FairApp.record("start", jid, "fair", tenant, index)
    sleep(sleep_ms / 1000.0)
    FairApp.record("finish", jid, "fair", tenant, index)
  end
end

# Re-routed to the fair queue once a tenant has pushed more than one job (the rule may target a fair queue).
class RoutedToFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "plain", retry: false, fair_tenant_queues: [{ queue: "fair", threshold: 1 }]

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index)
    FairApp.record("start", jid, "fair", tenant, index)
  end
end

class PlainQueueJob
  include Sidekiq::Worker

  sidekiq_options queue: "plain", retry: false

  def perform(index)
    FairApp.record("start", jid, "plain", nil, index)
  end
end

# Records its start and finish even through refused writes (a failover, min-replicas-to-write): a spec can
# then tell a job that ran twice from a record that failed. args: tenant, index, sleep_ms
class SteadyFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def self.record(*args)
    FairApp.record(*args)
  rescue StandardError
    sleep(0.05)
    retry
  end

  def perform(tenant, index, sleep_ms = 0)
    SteadyFairJob.record("start", jid, "fair", tenant, index)
    sleep(sleep_ms / 1000.0) if sleep_ms.positive?
    SteadyFairJob.record("finish", jid, "fair", tenant, index)
  end
end

# Records its start (index and time) in a file (FAIR_APP_EVENTS_FILE), not in Redis, then sleeps: a job that never
# waits for a stalled Redis, so a stall meets its thread's next fetch. args: tenant, index, sleep_ms
class FileFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(_tenant, index, sleep_ms)
    File.open(ENV.fetch("FAIR_APP_EVENTS_FILE"), "a") { |file| file.write("#{index} #{Time.now.to_f}\n") }
    sleep(sleep_ms / 1000.0)
  end
end

# Records, as its index, how many jobs still wait in queue:fair (not yet adopted) when it starts.
class ProbeFairJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, _index)
    left = Sidekiq.redis { |conn| conn.call("LLEN", "queue:fair") }
    FairApp.record("start", jid, "fair", tenant, left.to_i)
  end
end

# args: tenant, index, sleep_ms; in the queue fair2 (FAIR_APP_CAPSULE's second capsule).
class SecondCapsuleJob < SteadyFairJob
  sidekiq_options queue: "fair2"
end

if defined?(Sidekiq::IterableJob)
  # Sidekiq 7.3+'s iterable job (args: tenant, count): one element every 0.2 s; an interruption (the process
  # stopping) re-pushes it through Sidekiq::Client, and it resumes from its cursor.
  class FairIterableJob
    include Sidekiq::IterableJob

    sidekiq_options queue: "fair", retry: false

    def self.fair_tenant(tenant, *) = tenant

    def build_enumerator(_tenant, count, cursor:)
      array_enumerator((0...count).to_a, cursor: cursor)
    end

    def each_iteration(element, tenant, _count)
      FairApp.record("iteration", jid, "fair", tenant, element)
      sleep 0.2
    end

    def on_complete
      FairApp.record("complete", jid, "fair", arguments.first, -1)
    end
  end
end
