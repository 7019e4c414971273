# frozen_string_literal: true

# Tenants held back by concurrency caps in the fair queue `fair`, built for real: jobs pushed through
# Sidekiq's client (FairQueues::Push writes each job's slot) and fetched in this process with FairFetch, so each
# fetch takes its job's slot and a tenant whose next job finds its scope full leaves the rotation.

# One at a time per tenant and queue.
class ShownStaticCapJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 1 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# One at a time per custom key.
class ShownKeyCapJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 1, key: :cap_key }

  def self.fair_tenant(tenant, *) = tenant

  def self.cap_key(tenant, *) = "account-#{tenant}"

  def perform(*); end
end

# One at a time while other tenants wait; more on threads nobody else needs.
class ShownElasticCapJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 1, elastic: true }

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

class ShownUncappedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# Two at a time per tenant, and one at a time in all (a scope every tenant shares): several scopes on one job.
class ShownSharedCapJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false,
                  fair_tenant_concurrency: [{ limit: 2 }, { limit: 1, key: :shared_key }]

  def self.fair_tenant(tenant, *) = tenant

  def self.shared_key(*) = "partner-api"

  def perform(*); end
end

module CappedFair
  module_function

  # Pushes, in this order: 2 jobs of "static" (tenant and queue scope), 2 of "keyed" (custom key), 3 of
  # "elastic", 1 of "plain" (no cap), and fetches the first job of the first three tenants. Then "static"
  # and "keyed" are capped (1/1, one job waiting), "elastic" is over its elastic cap (1/1, two waiting) and
  # in force, as "plain" is ready. Returns the fetcher and the three units of work.
  def build
    2.times { |i| ShownStaticCapJob.perform_async("static", i) }
    2.times { |i| ShownKeyCapJob.perform_async("keyed", i) }
    3.times { |i| ShownElasticCapJob.perform_async("elastic", i) }
    ShownUncappedJob.perform_async("plain", 0)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
    units = Array.new(3) { fetch.retrieve_work }
    [fetch, units]
  end
end
