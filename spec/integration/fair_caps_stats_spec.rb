# frozen_string_literal: true

require "spec_helper"
require_relative "../support/capped_fair"

# Which tenants of a fair queue a concurrency cap holds back right now, as FairQueues::Stats reports them.
RSpec.describe "Fair stats of capped tenants" do
  let(:stats) { Sidekiq::FairTenant.fair_stats }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def capped = stats.queue("fair")[:capped]

  it "lists static caps in force and an elastic cap in force while another tenant is ready" do
    units = CappedFair.build[1]
    expect(units.map { |u| JSON.parse(u.job)["args"] }).to eq([["static", 0], ["keyed", 0], ["elastic", 0]])

    expect(stats.queues).to eq([{ queue: "fair", backlog: 5, startable: 3, paused: 0, held: 2, rate_held: 0,
                                  rated_tenants: 0, in_flight: 3, tenants: 4, capped_tenants: 3 }])
    result = stats.queue("fair")
    expect(result[:capped_tenants]).to eq(3)
    expect(result[:capped]).to eq(
      [{ tenant: "static", running: 1, limit: 1, elastic: false, in_force: true, waiting: 1,
         scope: { tenant: "static", queue: "fair" } },
       { tenant: "keyed", running: 1, limit: 1, elastic: false, in_force: true, waiting: 1,
         scope: { key: "account-keyed" } },
       { tenant: "elastic", running: 1, limit: 1, elastic: true, in_force: true, waiting: 2,
         scope: { tenant: "elastic", queue: "fair" } }]
    )
    expect(result[:page].map { |t| t[:tenant] }).to contain_exactly("static", "keyed", "elastic", "plain")
  end

  it "shows an elastic cap lifted while its tenant is alone, running past its limit" do
    fetch, = CappedFair.build
    expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["plain", 0]) # the last tenant under its limit
    expect(capped.last).to include(tenant: "elastic", running: 1, limit: 1, elastic: true, in_force: false)

    expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["elastic", 1]) # a spare thread
    expect(capped.map { |c| c.slice(:tenant, :running, :limit, :in_force, :waiting) })
      .to eq([{ tenant: "static", running: 1, limit: 1, in_force: true, waiting: 1 },
              { tenant: "keyed", running: 1, limit: 1, in_force: true, waiting: 1 },
              { tenant: "elastic", running: 2, limit: 1, in_force: false, waiting: 1 }])
  end

  it "drops a tenant whose slot came back, and puts the elastic cap back in force; reads runtime limits" do
    fetch, units = CappedFair.build
    fetch.retrieve_work # plain: the elastic cap is lifted
    expect(capped.last[:in_force]).to be(false)

    units.first.acknowledge
    fetch.flush_acks # static's slot back: static is ready again, so elastic waits
    expect(capped.map { |c| [c[:tenant], c[:in_force]] }).to eq([["keyed", true], ["elastic", true]])

    Sidekiq::FairTenant.limits.set(0, key: "account-keyed") # a lower limit keeps it capped, now at 0
    expect(capped.first).to include(tenant: "keyed", running: 1, limit: 0)
    expect(stats.queues.first[:capped_tenants]).to eq(2)
  end

  it "pages the capped tenants (lowest start tag first) and validates the page size" do
    CappedFair.build
    result = stats.queue("fair", capped_limit: 2)
    expect(result[:capped].map { |c| c[:tenant] }).to eq(%w[static keyed])
    expect(result[:capped_tenants]).to eq(3)
    expect { stats.queue("fair", capped_limit: 0) }
      .to raise_error(ArgumentError, /capped_limit and rated_limit 1\.\.1000/)
  end

  it "reports no capped tenant for a queue without caps" do
    ShownUncappedJob.perform_async("plain", 0)
    expect(stats.queue("fair")).to include(capped_tenants: 0, capped: [])
    expect(stats.queues.first[:capped_tenants]).to eq(0)
  end
end
