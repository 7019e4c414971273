# frozen_string_literal: true

# The application real Sidekiq processes load in the several-scopes specs: jobs held to a per-tenant limit and to
# a limit shared by every tenant (a partner API's), on a fair queue (`fair`). Each start and finish is recorded
# in Redis with the tenant, so specs count how many ran at once per tenant and in all.
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

module FairScopesApp
  EVENTS = "spec:scopes:events"

  def self.record(event, jid, tenant, kind)
    Sidekiq.redis do |conn|
      conn.call("RPUSH", EVENTS, JSON.generate("event" => event, "jid" => jid, "tenant" => tenant, "kind" => kind,
                                               "pid" => Process.pid,
                                               "at" => Process.clock_gettime(Process::CLOCK_REALTIME)))
    end
  end

  # args: tenant, sleep_ms
  module Perform
    def perform(tenant, sleep_ms = 0)
      FairScopesApp.record("start", jid, tenant, self.class.name)
      sleep(sleep_ms / 1000.0) if sleep_ms.positive?
      FairScopesApp.record("finish", jid, tenant, self.class.name)
    end
  end
end

# Two in flight per tenant, three in flight in all (the partner API's limit, shared by every tenant).
class SharedApiJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2, lease: 5 }, { limit: 3, lease: 5, key: :api_scope }]

  def self.fair_tenant(tenant, *) = tenant
  def self.api_scope(*) = "partner-api"
end

# The same two keys named in opposite orders by two classes, one in flight each.
class FirstOrderJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 1, lease: 5, key: :left }, { limit: 1, lease: 5, key: :right }]

  def self.fair_tenant(tenant, *) = tenant
  def self.left(*) = "left"
  def self.right(*) = "right"
end

class OtherOrderJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 1, lease: 5, key: :right }, { limit: 1, lease: 5, key: :left }]

  def self.fair_tenant(tenant, *) = tenant
  def self.left(*) = "left"
  def self.right(*) = "right"
end

class FreeFairJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant
end

# Five starts a second per tenant, and four a second in all (a window with its own key: one scope for every tenant).
class SharedRateJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_rate: [{ limit: 5, per: 1 }, { limit: 4, per: 1, key: :api_scope }]

  def self.fair_tenant(tenant, *) = tenant
  def self.api_scope(*) = "partner-api"
end

# Short leases (2 s): a SIGKILLed holder's slots come back soon. Two per tenant, one in all.
class SharedLeaseJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2, lease: 2 }, { limit: 1, lease: 2, key: :api_scope }]

  def self.fair_tenant(tenant, *) = tenant
  def self.api_scope(*) = "partner-api"
end

# Two in flight in all, short leases: the TERM case.
class TermScopesJob
  include Sidekiq::Worker
  include FairScopesApp::Perform

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2, lease: 2 }, { limit: 2, lease: 2, key: :api_scope }]

  def self.fair_tenant(tenant, *) = tenant
  def self.api_scope(*) = "partner-api"
end
