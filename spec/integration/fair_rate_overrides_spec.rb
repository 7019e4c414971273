# frozen_string_literal: true

require "spec_helper"
require_relative "../support/rated_fair"
require_relative "../support/fair_scopes_app"

# Runtime rate overrides (FairTenant.rates): they replace a scope's windows from the next start on, and take
# effect at once for tenants already waiting for a window.
RSpec.describe "Runtime rate overrides" do
  let(:rates) { Sidekiq::FairTenant.rates }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def rated_tenants = redis.zrange("#{base}rated", 0, -1).map { |member| member[16..] }
  def tenant_of(unit) = JSON.parse(unit.job)["args"][0]

  it "sets, gets, lists and deletes overrides, validated by the option's parser" do
    expect(rates.set([{ limit: 5, per: 1 }, { limit: 10_000, per: 86_400 }], tenant: "acme")).to eq(0)
    expect(rates.set("2/0.5", tenant: "acme", queue: "fair")).to eq(0)
    expect(rates.set([{ "limit" => 3, "per" => 60 }], key: "shop-42")).to eq(0)
    expect(rates.get(tenant: "acme")).to eq([{ limit: 5, per: 1.0 }, { limit: 10_000, per: 86_400.0 }])
    expect(rates.get(tenant: "acme", queue: "fair")).to eq([{ limit: 2, per: 0.5 }])
    expect(rates.list).to eq([{ key: "shop-42", windows: [{ limit: 3, per: 60.0 }] },
                              { tenant: "acme", queue: nil, windows: [{ limit: 5, per: 1.0 },
                                                                      { limit: 10_000, per: 86_400.0 }] },
                              { tenant: "acme", queue: "fair", windows: [{ limit: 2, per: 0.5 }] }])
    rates.delete(tenant: "acme")
    expect(rates.get(tenant: "acme")).to be_nil

    [["0/1", /window 1: limit must be an Integer >= 1/], ["5", /window 1: per must be/],
     [[{ limit: 2, per: 1, every: 2 }], /unknown key "every"/], [{ limit: 2, per: 1, key: :shop }, /take no key/]]
      .each do |windows, reason|
        expect { rates.set(windows, tenant: "acme") }
          .to raise_error(ArgumentError, /\ASidekiq::FairTenant\.rates: /) { |e| expect(e.message).to match(reason) }
      end
    expect { rates.set("1/1", tenant: "a", key: "b") }.to raise_error(ArgumentError, /give tenant:/)
  end

  it "holds every tenant to an override of a shared rate scope (a window with its own key), beside their own" do
    %w[a b].each { |tenant| 3.times { SharedRateJob.perform_async(tenant, 0) } }
    rates.set("2/60", key: "partner-api") # the shared window was 4 a second
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
    served = Array.new(2) { fetch.retrieve_work.tap(&:acknowledge) }
    expect(served.map { |unit| tenant_of(unit) }).to contain_exactly("a", "b") # fair order inside the shared scope
    expect(fetch.retrieve_work).to be_nil # a and b have their own room (5 a second), the shared scope none
    expect(rated_tenants).to contain_exactly("a", "b")

    rates.delete(key: "partner-api") # back to the class's 4 a second: two more start at once
    expect(Array.new(2) { fetch.retrieve_work&.tap(&:acknowledge) }.compact.size).to eq(2)
    fetch.flush_acks
  end

  it "takes effect at once: a raised limit brings a held tenant back, which the next fetch serves" do
    fetch, = RatedFair.build(jobs: 4) # L made its 2 starts in 3 s and waits in `rated`
    expect(rated_tenants).to eq(["L"])

    expect(rates.set([{ limit: 3, per: 3 }], tenant: "L", queue: "fair")).to eq(1)
    expect(rated_tenants).to eq([])
    expect(tenant_of(fetch.retrieve_work.tap(&:acknowledge))).to eq("L") # the third start of 3
    expect(fetch.retrieve_work).to be_nil # the fourth is over the new window: L waits again
    expect(rated_tenants).to eq(["L"])
    row = Sidekiq::FairTenant.fair_stats.queue("fair")[:rated].first
    expect(row).to include(tenant: "L", windows: [{ limit: 3, per: 3.0, starts: 3 }])
    fetch.flush_acks
  end

  it "a lowered limit holds a tenant from its next start; deleting it gives back the class's windows" do
    rates.set("1/3", tenant: "L")
    fetch, units = RatedFair.build(jobs: 3)
    expect(units.map { |u| tenant_of(u) }.sort).to eq(%w[L M]) # one start of L, not the class's two
    expect(rated_tenants).to eq(["L"])

    expect(rates.delete(tenant: "L")).to eq(1) # back to 2 in 3 s: L may make its second start now
    expect(tenant_of(fetch.retrieve_work.tap(&:acknowledge))).to eq("L")
    expect(fetch.retrieve_work).to be_nil
    expect(rated_tenants).to eq(["L"])
    fetch.flush_acks
  end

  it "applies an override to rate-held tenants in bounded calls, wherever they are in `rated`" do
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "rated:1:b").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    tenants = Array.new(7) { |i| "T#{i}" }
    tenants.each { |t| 3.times { |i| SlowRateJob.perform_async(t, i, 0) } }
    served = []
    while (unit = fetch.retrieve_work)
      served << tenant_of(unit.tap(&:acknowledge))
    end
    fetch.flush_acks
    expect(served.tally).to eq(tenants.to_h { |t| [t, 2] })
    expect(rated_tenants).to match_array(tenants)

    stub_const("Sidekiq::FairTenant::Rates::BATCH", 2) # 7 held tenants: at least 4 calls per override
    calls = -> { redis.info("commandstats").dig("fcall", "calls").to_i }
    %w[T6 T0 T3].each_with_index do |tenant, i|
      before = calls.call
      expect(rates.set("3/3", tenant: tenant)).to eq(1)
      expect(calls.call - before).to be >= 3
      expect(rated_tenants).to match_array(tenants - %w[T6 T0 T3].first(i + 1))
    end
    expect(rates.set("3/3", key: "unused")).to eq(0) # covers none of them: each call reads, none comes back
    expect(rated_tenants).to match_array(tenants - %w[T6 T0 T3])
  end

  describe "a recheck cut short" do
    let(:rechecks) { Sidekiq::FairTenant::Native::Names::RATE_RECHECKS_KEY }

    # Every set_rate call after the first `calls` raises (the writer killed, or the call refused).
    def cut_after(calls)
      done = 0
      allow(Sidekiq::FairTenant::ScriptRunner).to receive(:run).and_wrap_original do |original, conn, name, *rest|
        raise "NOREPLICAS (cut)" if name == "set_rate" && (done += 1) > calls

        original.call(conn, name, *rest)
      end
    end

    it "leaves no mark when it ran to its end" do
      RatedFair.build(jobs: 4)
      expect(rates.set([{ limit: 3, per: 3 }], tenant: "L", queue: "fair")).to eq(1)
      expect(redis.hlen(rechecks)).to eq(0)
    end

    it "is finished by the next recovery sweep: the held tenant comes back, and the mark goes" do
      RatedFair.build(jobs: 4) # L waits in `rated`
      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[aaa fair] } # aaa's call first, then fair's
      cut_after(1)
      expect { rates.set([{ limit: 3, per: 3 }], tenant: "L", queue: "fair") }.to raise_error(/NOREPLICAS/)
      RSpec::Mocks.space.proxy_for(Sidekiq::FairTenant::ScriptRunner).reset
      expect(rates.get(tenant: "L", queue: "fair")).to eq([{ limit: 3, per: 3.0 }]) # written, not applied
      expect(rated_tenants).to eq(["L"])
      expect(redis.hlen(rechecks)).to eq(1)

      result = Sidekiq.redis { |conn| Sidekiq::FairTenant::FairFetch::Sweeper.turn(conn, "sweeper:1:a") }

      expect(result).to include(rechecked: 1)
      expect(rated_tenants).to eq([])
      expect(redis.hlen(rechecks)).to eq(0)
    end

    it "keeps the mark of a newer write of the same scope when an older one's finisher ends" do
      RatedFair.build(jobs: 4)
      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[aaa fair] }
      cut_after(1)
      expect { rates.set("3/3", tenant: "L", queue: "fair") }.to raise_error(/NOREPLICAS/)
      expect { rates.set("4/3", tenant: "L", queue: "fair") }.to raise_error(/NOREPLICAS/) # marks it again
      RSpec::Mocks.space.proxy_for(Sidekiq::FairTenant::ScriptRunner).reset
      stale = redis.hgetall(rechecks).to_a.first
      Sidekiq.redis { |conn| rates.send(:done, conn, [stale[0], "older"]) } # the first write's writer, at its end
      expect(redis.hgetall(rechecks)).to eq([stale].to_h)
    end
  end
end
