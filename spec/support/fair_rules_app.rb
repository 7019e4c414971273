# frozen_string_literal: true

# The application real Sidekiq processes load in the fair-queue rules spec: `fair` and `fair_throttled` are
# fair queues, and the job classes keep re-routing rules from `fair`. Each job records the queue it ran from.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
module FairRulesApp
  EVENTS = "spec:fair_rules:events"

  # Remembers the queue a job was fetched from, for the job's record.
  class QueueOf
    include ::Sidekiq::ServerMiddleware if defined?(::Sidekiq::ServerMiddleware)

    def call(_job, _payload, queue)
      Thread.current[:fair_rules_queue] = queue
      yield
    end
  end

  module Recording
    def perform(tenant, index)
      event = { "class" => self.class.name, "tenant" => tenant, "index" => index,
                "queue" => Thread.current[:fair_rules_queue] }
      Sidekiq.redis { |conn| conn.call("RPUSH", EVENTS, JSON.generate(event)) }
    end
  end
end

Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN
  Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair fair_throttled] }
  config.server_middleware { |chain| chain.add FairRulesApp::QueueOf }
end

require_relative "parent_watch"

# The original gem's rules, kept: past 1 job a minute a tenant's jobs would go to fair_throttled.
class RulesOnFairJob
  include Sidekiq::Worker
  include FairRulesApp::Recording

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_queues: [{ queue: "fair_throttled", threshold: 1, per: 60 }]

  def self.fair_tenant(tenant, *) = tenant
end

# The same rule, asked to re-route from a fair queue too.
class RerouteFromFairJob
  include Sidekiq::Worker
  include FairRulesApp::Recording

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_queues: [{ queue: "fair_throttled", threshold: 1, per: 60, from_fair_queue: true }]

  def self.fair_tenant(tenant, *) = tenant
end

# A throttling rule kept from the original gem, and a rule that moves a very busy tenant to processes of
# its own, from the fair queue too.
class IsolatingFairJob
  include Sidekiq::Worker
  include FairRulesApp::Recording

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_queues: [{ queue: "fair_throttled", threshold: 1, per: 60 },
                                       { queue: "own_processes", threshold: 3, per: 60, from_fair_queue: true }]

  def self.fair_tenant(tenant, *) = tenant
end
