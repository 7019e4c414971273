# frozen_string_literal: true

require "spec_helper"
require_relative "../support/active_job"

class AjThrottledJob < ActiveJob::Base
  queue_as :default
  sidekiq_options fair_tenant_queues: [{ queue: "slow", threshold: 2, per: 60 }]

  # Receives the deserialized perform arguments (symbol keys survive).
  def self.fair_tenant(options) = "account-#{options.fetch(:account)}"

  def perform(_options); end
end

class AjProcQueueJob < ActiveJob::Base
  queue_as { arguments.first == "vip" ? "vip" : "default" }
  sidekiq_options fair_tenant_queues: [{ queue: "slow", threshold: 1 }]

  def self.fair_tenant(*) = "t"

  def perform(_kind); end
end

class AjFairJob < ActiveJob::Base
  queue_as :fair_aj

  def self.fair_tenant(shop, _index) = "shop-#{shop}"

  def perform(_shop, _index); end
end

# Several concurrency scopes (issue 32): its shop's, and one every shop shares.
class AjScopedJob < ActiveJob::Base
  queue_as :fair_aj
  sidekiq_options fair_tenant_concurrency: [{ limit: 2 }, { limit: 3, key: :api_scope }]

  def self.fair_tenant(shop, _index) = "shop-#{shop}"
  def self.api_scope(*) = "partner-api"

  def perform(_shop, _index); end
end

RSpec.describe "ActiveJob on the Sidekiq adapter" do
  # ActiveJob 7.1+ (Rails 7.2 on Debian forky): a bulk enqueue goes through Sidekiq's push_bulk.
  if ActiveJob.respond_to?(:perform_all_later)
    it "counts every job of perform_all_later under its own tenant" do
      ActiveJob.perform_all_later(Array.new(3) { AjThrottledJob.new(account: 7) } + [AjThrottledJob.new(account: 8)])

      jobs = queue_jobs("default") + queue_jobs("slow")
      expect(jobs.map { |job| job["fair_tenant"] }).to contain_exactly(*%w[account-7] * 3, "account-8")
      expect(Sidekiq::FairTenant.stats.tenant(AjThrottledJob, "account-7")[:windows].first[:count]).to eq(3)
      expect(Sidekiq::FairTenant.stats.tenant(AjThrottledJob, "account-8")[:windows].first[:count]).to eq(1)
    end

    it "puts every job of perform_all_later on a fair queue in its tenant's list" do
      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair_aj] }
      ActiveJob.perform_all_later(Array.new(4) { |i| AjFairJob.new(i.even? ? "a" : "b", i) })

      base = Sidekiq::FairTenant::FairQueues.base("fair_aj")
      expect(%w[a b].map { |shop| redis.llen("#{base}t:shop-#{shop}") }).to eq([2, 2])
      expect(queue_size("fair_aj")).to eq(0)
      expect(Sidekiq::Queue.new("fair_aj").size).to eq(4)
    ensure
      Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    end
  end

  it "re-routes past the threshold, with the tenant from self.fair_tenant(*arguments)" do
    3.times { AjThrottledJob.perform_later(account: 7) }
    AjThrottledJob.perform_later(account: 8)

    expect(queue_size("default")).to eq(3)
    expect(queue_size("slow")).to eq(1)
    job = queue_jobs("slow").first
    expect(job).to include("wrapped" => "AjThrottledJob", "fair_tenant" => "account-7")
    expect(job.dig("args", 0, "queue_name")).to eq("default")
  end

  it "goes through the adapter this Sidekiq ships (7.3.9+: Sidekiq's own, defined by sidekiq/rails)" do
    AjThrottledJob.perform_later(account: 7)

    # 8.x pushes Sidekiq::ActiveJob::Wrapper itself, JobWrapper its alias; 7.3.9+ a JobWrapper subclass of it
    wrapper = SpecHelpers::SIDEKIQ8 ? Sidekiq::ActiveJob::Wrapper : ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper
    expect(queue_jobs("default").first["class"]).to eq(wrapper.name)
    adapter_file = ActiveJob::Base.queue_adapter.method(:enqueue).source_location.first
    if Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7.3.9")
      expect(adapter_file).to start_with(Gem.loaded_specs.fetch("sidekiq").full_gem_path)
      expect(ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper).to be <= Sidekiq::ActiveJob::Wrapper
    else
      expect(adapter_file).to start_with(Gem.loaded_specs.fetch("activejob").full_gem_path)
    end
  end

  it "reports the class's tenants through the stats API" do
    3.times { AjThrottledJob.perform_later(account: 7) }

    row = Sidekiq::FairTenant.stats.tenant(AjThrottledJob, "account-7")
    expect(row).to include(next_queue: "slow", throttled: true)
    expect(row[:windows]).to eq([{ queue: "slow", threshold: 2, per: 60.0, count: 3 }])
    expect(row[:last_rerouted_at]).to be_within(1).of(Time.now)
    expect(Sidekiq::FairTenant.stats.tenants("AjThrottledJob").total).to eq(1)
  end

  it "leaves jobs sent to an explicit queue alone" do
    4.times { AjThrottledJob.set(queue: :urgent).perform_later(account: 7) }

    expect(queue_size("urgent")).to eq(4)
    expect(queue_size("slow")).to eq(0)
  end

  it "evaluates a Proc queue_name to tell the default queue from an explicit one" do
    3.times { AjProcQueueJob.perform_later("vip") }
    2.times { AjProcQueueJob.set(queue: "other").perform_later("vip") }

    expect(queue_size("vip")).to eq(1)
    expect(queue_size("slow")).to eq(2)
    expect(queue_size("other")).to eq(2)
  end

  it "carries every concurrency scope of a job of several into a fair queue, its shop's first" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair_aj] }
    AjScopedJob.perform_later("a", 1)

    job = JSON.parse(redis.lrange("#{Sidekiq::FairTenant::FairQueues.base("fair_aj")}t:shop-a", 0, 0).first)
    slots = Sidekiq::FairTenant::Native::Slots
    scope = Sidekiq::FairTenant::Concurrency::SlotScope
    expect(job[scope::FIELD].first(3)).to eq([*slots.tenant_scope("shop-a", "fair_aj"), 2])
    expect(job[scope::MORE_FIELD].map { |s| s.first(3) })
      .to eq([[*slots.key_scope("partner-api"), 3]])
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "refuses two concurrency scopes that are one, naming the class" do
    expect do
      Class.new(ActiveJob::Base) do
        def self.name = "TwiceAjJob"
        sidekiq_options fair_tenant_concurrency: [{ limit: 2 }, { limit: 3 }]
      end
    end.to raise_error(ArgumentError, /TwiceAjJob: invalid fair_tenant_concurrency/)
  end

  it "validates rules declared through ActiveJob's sidekiq_options" do
    expect do
      Class.new(ActiveJob::Base) do
        def self.name = "BadAjJob"
        sidekiq_options fair_tenant_queues: [{ queue: "slow", threshold: 1, per: -5 }]
      end
    end.to raise_error(ArgumentError, /BadAjJob: invalid fair_tenant_queues rule #1 .*per must be positive/)
  end
end
