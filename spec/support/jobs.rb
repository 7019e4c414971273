# frozen_string_literal: true

# Sample jobs used across the specs.

class ThrottledJob
  include Sidekiq::Worker

  sidekiq_options queue: "default",
                  fair_tenant_queues: [
                    { queue: "throttled_2x", threshold: 3, per: 60 },
                    { queue: "throttled_4x", threshold: 5, per: 10 }
                  ]

  def self.fair_tenant(tenant_id, *)
    "tenant-#{tenant_id}" unless tenant_id.nil?
  end

  def perform(*); end
end

class DurationRuleJob
  include Sidekiq::Worker

  sidekiq_options queue: "default",
                  fair_tenant_queues: [{ queue: "slow", threshold: 1, per: 1.hour }]

  def perform(*); end
end

class NoTenantJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "slow", threshold: 0 }]

  def perform(*); end
end

class PlainJob
  include Sidekiq::Worker

  sidekiq_options queue: "default"

  def perform(*); end
end

class HundredJob
  include Sidekiq::Worker

  sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "slow", threshold: 100, per: 3600 }]

  def perform(*); end
end

class HostileTenantJob
  include Sidekiq::Worker

  TENANTS = ["{", "*", "a b", "line\nbreak", "x" * 10_240, "\xff\xfe".b, "ünï{cøde}"].freeze

  sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "slow", threshold: 0 }]

  def self.fair_tenant(index) = TENANTS.fetch(index)

  def perform(*); end
end
