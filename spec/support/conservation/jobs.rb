# frozen_string_literal: true

# Jobs of the conservation run (spec/integration/conservation_spec.rb). The tenant is the first argument;
# "bytes" stands for a tenant whose name is not UTF-8 (a tenant method may return any bytes).
module Conservation
  BYTES_TENANT = "\xff\xferaw".b.freeze
  TENANTS = %w[acme bravo ünïcødé 日本 bytes].freeze
  CAPPED_TENANTS = %w[acme ünïcødé bravo].freeze
  WEIGHTED_TENANTS = %w[acme bravo ünïcødé 日本].freeze # weight fields are UTF-8
  QUEUE_SETS = [[%w[fair fair2 plain], true], [%w[fair fair fair2 plain], false], [%w[fair2 plain fair], true],
                [%w[fair], true], [%w[plain fair2 fair], false]].freeze

  SHARED_KEY = "partner-api"

  def self.tenant_of(name) = name == "bytes" ? BYTES_TENANT : name
end

class ConservedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = Conservation.tenant_of(tenant)

  def perform(*); end
end

# Two at a time per tenant in `fair` (a runtime limit may change that).
class ConservedCappedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 2, lease: 600 }

  def self.fair_tenant(tenant, *) = Conservation.tenant_of(tenant)

  def perform(*); end
end

# Two scopes on one job: its tenant's in `fair` (the one ConservedCappedJob takes too) and one every tenant shares
# (three at a time); it starts only when both have room (a runtime limit may change either).
class ConservedSharedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2, lease: 600 }, { limit: 3, lease: 600, key: :shared_key }]

  def self.fair_tenant(tenant, *) = Conservation.tenant_of(tenant)
  def self.shared_key(*) = Conservation::SHARED_KEY

  def perform(*); end
end

# The same two scopes named the other way round (the shared one first): nothing is held while a job waits, so
# the two orders never deadlock.
class ConservedSharedFirstJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 3, lease: 600, key: :shared_key }, { limit: 2, lease: 600 }]

  def self.fair_tenant(tenant, *) = Conservation.tenant_of(tenant)
  def self.shared_key(*) = Conservation::SHARED_KEY

  def perform(*); end
end

# Concurrency and rate at once (fair queues only: rate caps do nothing elsewhere): its tenant's slot scope and the
# shared one, a window of its tenant's and a window every tenant shares. A tenant over a window leaves the rotation
# until the window lets its next job start (Redis's clock: the run's settle waits it out).
class ConservedRatedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2, lease: 600 }, { limit: 3, lease: 600, key: :shared_key }],
                  fair_tenant_rate: [{ limit: 2, per: 1 }, { limit: 3, per: 1, key: :shared_key }]

  def self.fair_tenant(tenant, *) = Conservation.tenant_of(tenant)
  def self.shared_key(*) = Conservation::SHARED_KEY

  def perform(*); end
end
