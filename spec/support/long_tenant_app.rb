# frozen_string_literal: true

# The fair app plus a job whose `fair_tenant` returns a name far too long for a key (issue 33, item 6): a payload
# returned by mistake. It is routed (counted, from the fair queue), capped, rated and queued fairly.
require_relative "fair_app"

class LongTenantJob
  include Sidekiq::Worker

  TENANTS = { "wide" => "é" * 500_000, "ascii" => "a" * 300 }.freeze

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_queues: [{ queue: "fair", threshold: 1_000, from_fair_queue: true }],
                  fair_tenant_concurrency: { limit: 2, lease: 5 },
                  fair_tenant_rate: [{ limit: 1_000, per: 1 }]

  def self.fair_tenant(kind, *) = TENANTS.fetch(kind)

  def perform(kind, index)
    FairApp.record("start", jid, "fair", kind, index)
  end
end
