# frozen_string_literal: true

require "spec_helper"
require_relative "../support/active_job"

# Counts ActiveJob::Arguments.deserialize calls; the real deserialization runs.
module DeserializeCount
  class << self
    attr_accessor :calls
  end
  self.calls = 0

  def deserialize(...)
    DeserializeCount.calls += 1
    super
  end
end
ActiveJob::Arguments.singleton_class.prepend(DeserializeCount)

# Counts its class method's calls, as the other classes below do.
class LookupJob
  include Sidekiq::Worker

  class << self
    attr_accessor :lookups
  end
  self.lookups = 0

  sidekiq_options queue: "lookup_fair", fair_tenant_queues: [{ queue: "lookup_slow", threshold: 100 }],
                  fair_tenant_concurrency: { limit: 2 }

  def self.fair_tenant(shop, *)
    LookupJob.lookups += 1 # LookupRoutedJob's too
    "shop-#{shop}" unless shop.nil?
  end

  def perform(*); end
end

class LookupRoutedJob < LookupJob
  sidekiq_options fair_tenant_queues: [{ queue: "lookup_slow", threshold: 100, from_fair_queue: true }]
end

class LookupAjJob < ActiveJob::Base
  class << self
    attr_accessor :lookups
  end
  self.lookups = 0

  queue_as :lookup_fair
  sidekiq_options fair_tenant_queues: [{ queue: "lookup_slow", threshold: 100, from_fair_queue: true }],
                  fair_tenant_concurrency: { limit: 2 }

  def self.fair_tenant(options)
    self.lookups += 1
    "account-#{options.fetch(:account)}"
  end

  def perform(_options); end
end

# A queue chosen by a Proc (evaluated on an instance) and a slot scope from a key method: both need the arguments.
class LookupAjKeyJob < ActiveJob::Base
  class << self
    attr_accessor :lookups, :keys
  end
  self.lookups = 0
  self.keys = 0

  queue_as { arguments.first == "vip" ? "lookup_vip" : "lookup_fair" }
  sidekiq_options fair_tenant_queues: [{ queue: "lookup_slow", threshold: 100, from_fair_queue: true }],
                  fair_tenant_concurrency: { limit: 1, key: :lookup_key }

  def self.fair_tenant(kind, _customer)
    self.lookups += 1
    "kind-#{kind}"
  end

  def self.lookup_key(_kind, customer)
    self.keys += 1
    "customer-#{customer}"
  end

  def perform(_kind, _customer); end
end

# One push works out its tenant once, whoever asks: routing, the slot scope and the fair push.
RSpec.describe "One tenant lookup per push" do
  let(:base) { Sidekiq::FairTenant::FairQueues.base("lookup_fair") }

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[lookup_fair lookup_slow] } }
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def tenant_jobs(tenant) = redis.lrange("#{base}t:#{tenant}", 0, -1).map { |job| JSON.parse(job) }

  def window_count(klass, tenant)
    Sidekiq::FairTenant.stats.tenant(klass, tenant)[:windows].first[:count]
  end

  # The number of calls the block made to each counter, by name.
  def calls(counters)
    before = counters.transform_values(&:call)
    yield
    counters.to_h { |name, counter| [name, counter.call - before[name]] }
  end

  it "asks a class once per push on a fair queue whose rules stay off, and the job carries its slot" do
    counted = calls(fair_tenant: -> { LookupJob.lookups }) { 3.times { LookupJob.perform_async(7) } }

    expect(counted).to eq(fair_tenant: 3)
    jobs = tenant_jobs("shop-7")
    expect(jobs.size).to eq(3)
    expect(jobs.map { |job| job[Sidekiq::FairTenant::Concurrency::SlotScope::FIELD][2] }).to all(eq(2))
    expect(jobs.map { |job| job["fair_tenant"] }).to all(be_nil) # the payload is the one the app pushed
  end

  it "asks a class once per push when a rule counts it on the fair queue too" do
    counted = calls(fair_tenant: -> { LookupJob.lookups }) { 3.times { LookupRoutedJob.perform_async(8) } }

    expect(counted).to eq(fair_tenant: 3)
    expect(window_count(LookupRoutedJob, "shop-8")).to eq(3)
    field = Sidekiq::FairTenant::Concurrency::SlotScope::FIELD
    expect(tenant_jobs("shop-8").map { |job| job[field][2] }).to eq([2, 2, 2])
  end

  it "asks once per job of a push_bulk" do
    counted = calls(fair_tenant: -> { LookupJob.lookups }) do
      Sidekiq::Client.push_bulk("class" => LookupRoutedJob, "args" => [[1], [2], [1], [3]])
    end

    expect(counted).to eq(fair_tenant: 4)
    expect(%w[shop-1 shop-2 shop-3].map { |tenant| tenant_jobs(tenant).size }).to eq([2, 1, 1])
  end

  it "asks once for a job with no tenant, which goes to the shared tenant" do
    counted = calls(fair_tenant: -> { LookupJob.lookups }) do
      capture_log { 2.times { LookupRoutedJob.perform_async(nil) } }
    end

    expect(counted).to eq(fair_tenant: 2)
    expect(tenant_jobs(Sidekiq::FairTenant::FairQueues::SHARED_TENANT).size).to eq(2)
  end

  it "deserializes an ActiveJob job's arguments once per push, for its tenant and its slot" do
    counted = calls(fair_tenant: -> { LookupAjJob.lookups }, deserialize: -> { DeserializeCount.calls }) do
      3.times { LookupAjJob.perform_later(account: 5) }
    end

    expect(counted).to eq(fair_tenant: 3, deserialize: 3)
    expect(window_count(LookupAjJob, "account-5")).to eq(3)
    field = Sidekiq::FairTenant::Concurrency::SlotScope::FIELD
    expect(tenant_jobs("account-5").map { |job| job[field][2] }).to eq([2, 2, 2])
  end

  it "deserializes once per push for a Proc queue, the tenant and a key method's slot" do
    counted = calls(fair_tenant: -> { LookupAjKeyJob.lookups }, key: -> { LookupAjKeyJob.keys },
                    deserialize: -> { DeserializeCount.calls }) do
      2.times { LookupAjKeyJob.perform_later("std", 9) }
    end

    expect(counted).to eq(fair_tenant: 2, key: 2, deserialize: 2)
    expect(window_count(LookupAjKeyJob, "kind-std")).to eq(2)
    slots = tenant_jobs("kind-std").map { |job| job[Sidekiq::FairTenant::Concurrency::SlotScope::FIELD] }
    expect(slots.map(&:first).uniq).to eq([Sidekiq::FairTenant::Native::Slots.key_scope("customer-9").first])
  end
end
