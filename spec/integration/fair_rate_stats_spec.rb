# frozen_string_literal: true

require "spec_helper"
require_relative "../support/rated_fair"

# Tenants of a fair queue waiting for a rate window, as FairQueues::Stats reports them.
RSpec.describe "Fair stats of rate-capped tenants" do
  let(:stats) { Sidekiq::FairTenant.fair_stats }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  it "lists a rate-held tenant with its windows, starts and next start; its jobs are not startable" do
    _, units = RatedFair.build(jobs: 4)
    expect(units.map { |u| JSON.parse(u.job)["args"][0] }.sort).to eq(%w[L L M])

    expect(stats.queues).to eq([{ queue: "fair", backlog: 2, startable: 0, paused: 0, held: 0, rate_held: 2,
                                  rated_tenants: 1, in_flight: 0, tenants: 1, capped_tenants: 0 }])
    result = stats.queue("fair")
    expect(result).to include(backlog: 2, startable: 0, rate_held: 2, rated_tenants: 1)
    expect(result[:rated].size).to eq(1)
    row = result[:rated].first
    expect(row).to include(tenant: "L", waiting: 2, scope: { tenant: "L", queue: "fair" },
                           windows: [{ limit: 2, per: 3.0, starts: 2 }])
    expect(row[:next_start_in]).to be_between(0.0, 3.0)
  end

  it "pages the rated tenants and validates the page size" do
    RatedFair.build
    expect(stats.queue("fair", rated_limit: 1)[:rated].map { |r| r[:tenant] }).to eq(%w[L])
    expect { stats.queue("fair", rated_limit: 0) }
      .to raise_error(ArgumentError, /capped_limit and rated_limit 1\.\.1000, got 0, 50, 50, 0/)
  end

  it "reports no rated tenant for a queue without rate caps" do
    UncappedRateAppJob.perform_async("M", 0, 0)
    expect(stats.queue("fair")).to include(rated_tenants: 0, rated: [], startable: 1)
    expect(stats.queues.first).to include(rate_held: 0, rated_tenants: 0)
  end
end
