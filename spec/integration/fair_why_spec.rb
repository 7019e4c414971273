# frozen_string_literal: true

require "spec_helper"
require_relative "../support/capped_fair"
require "sidekiq/fair_tenant/cli"

# Why is this job still waiting? FairTenant.why on real pushes and a real FairFetch in this process.
RSpec.describe "Sidekiq::FairTenant.why" do
  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    Sidekiq::FairTenant.weights.delete(tenant: "plain")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  let(:why) { ->(jid) { Sidekiq::FairTenant.why(jid) } }

  def jid_of(unit) = JSON.parse(unit.job)["jid"]

  it "names the concurrency scope that holds a capped tenant's job, with its holders" do
    fetch, units = CappedFair.build
    waiting = ShownStaticCapJob.perform_async("static", 2)
    result = why.call(waiting)
    expect(result).to include(jid: waiting, state: :waiting, queue: "fair", tenant: "static", ahead_in_tenant: 1,
                              tenant_backlog: 2, place: :capped, weight: 1.0)
    held = result.dig(:held_by, :concurrency)
    expect(held).to include(scope: { tenant: "static", queue: "fair" }, running: 1, limit: 1, elastic: false)
    expect(held[:holders].map { |h| h[:jid] }).to eq([jid_of(units[0])])
    expect(held[:holders].first[:lease_left]).to be > 0
    expect(why.call(jid_of(units[0]))).to eq(jid: jid_of(units[0]), state: :running, queue: "fair",
                                             tenant: "static", process: fetch.identity, alive: false,
                                             back_within: nil)
  end

  it "names the scope that holds a job of several scopes: the shared one when it is full" do
    ShownSharedCapJob.perform_async("first", 0)
    waiting = ShownSharedCapJob.perform_async("second", 0)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
    running = fetch.retrieve_work
    expect(JSON.parse(running.job)["args"]).to eq(["first", 0])
    expect(fetch.retrieve_work).to be_nil # "second" has room of its own (0/2), but the shared scope is full

    result = why.call(waiting)
    expect(result).to include(state: :waiting, tenant: "second", place: :capped)
    expect(result.dig(:held_by, :concurrency)).to include(scope: { key: "partner-api" }, running: 1, limit: 1)
    text = Sidekiq::FairTenant::CLI::WhyText.lines(result).join("\n")
    expect(text).to include("held by key partner-api: running 1/1")
    # Stats (the Web tab's and `stats`' concurrency list) show both scopes the running job holds, the shared key by
    # its name.
    scopes = Sidekiq::FairTenant.stats.concurrency.map { |s| s.slice(:tenant, :queue, :key, :running, :limit) }
    expect(scopes).to contain_exactly({ key: "partner-api", running: 1, limit: 1 },
                                      { tenant: "first", queue: "fair", running: 1, limit: 2 })
  end

  it "says a job in a live process's in-flight list runs there or goes back within the audit's bound" do
    fetch, units = CappedFair.build
    redis.hset(fetch.identity, "beat", Time.now.to_f) # the process's Sidekiq heartbeat
    jid = jid_of(units[0])
    result = why.call(jid)
    within = Sidekiq::FairTenant::FairFetch::Audit.within
    expect(result).to include(state: :running, process: fetch.identity, alive: true, back_within: within)
    expect(within).to eq((2 * Sidekiq::FairTenant::Native::Fair::INFLIGHT_AUDIT_SECONDS) + 1)
    expect(Sidekiq::FairTenant::CLI::WhyText.lines(result)).to eq(
      ["#{jid} is in flight at #{fetch.identity} (queue fair, tenant static): running there, or back at the " \
       "front of its tenant within #{within} s if no thread there runs it"]
    )
    redis.del(fetch.identity)
    expect(Sidekiq::FairTenant::CLI::WhyText.lines(why.call(jid))).to eq(
      ["#{jid} is in flight at #{fetch.identity} (queue fair, tenant static): its heartbeat is gone; it goes " \
       "back once the process is taken for dead"]
    )
  end

  it "finds a job in the in-flight list of a process of the previous gem (format 2), and stats count it" do
    old = "old-gem:1:a"
    job = JSON.generate({ "class" => "ShownUncappedJob", "queue" => "fair", "args" => ["acme", 1], "jid" => "old1" })
    redis.sadd(Sidekiq::FairTenant::Native::Fair.registry_key, old)
    redis.lpush(Sidekiq::FairTenant::Native::Fair.inflight_key(old), "4:fair4:acme#{job}")
    expect(why.call("old1")).to include(state: :running, queue: "fair", tenant: "acme", process: old)
    expect(Sidekiq::FairTenant.fair_stats.queues.first).to include(queue: "fair", in_flight: 1)
  end

  it "says where a job of a ready tenant stands: its own jobs ahead, the tenants ahead, its share" do
    3.times { |i| ShownUncappedJob.perform_async("a", i) }
    ShownUncappedJob.perform_async("b", 0)
    last = ShownUncappedJob.perform_async("b", 1)
    result = why.call(last)
    expect(result).to include(state: :waiting, tenant: "b", ahead_in_tenant: 1, tenant_backlog: 2, place: :ready,
                              tenants_ahead: 1, tenants_ready: 2, weight: 1.0, share: 0.5, held_by: nil)
  end

  it "says a paused tenant's job waits for its weight, and leaves the share out" do
    ShownUncappedJob.perform_async("other", 0)
    jid = ShownUncappedJob.perform_async("plain", 0)
    Sidekiq::FairTenant.weights.set(0, tenant: "plain")
    expect(why.call(jid)).to include(state: :waiting, tenant: "plain", place: :paused, weight: 0.0, share: nil,
                                     held_by: :paused)
  end

  it "finds a job past several calls of the find script (more jobs than one call reads)" do
    jobs = Array.new(2_500) { |i| [i] }
    Sidekiq::Client.push_bulk("class" => ShownUncappedJob, "args" => jobs, "fair_tenant" => nil)
    last = ShownUncappedJob.perform_async("late", 0)
    expect(why.call(last)).to include(state: :waiting, tenant: "late", ahead_in_tenant: 0, place: :ready)
  end

  it "finds a waiting job whose jid JSON escapes (quote, backslash, control byte) or shares a prefix" do
    jids = ["ab", "ab\"", "a\\b", "tab\there", "é/ü", "ab\"c"]
    pushed = jids.each_with_index.map do |jid, i|
      Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => "fair", "jid" => jid, "args" => ["t#{i}", i])
    end
    expect(pushed).to eq(jids)
    jids.each_with_index do |jid, i|
      expect(why.call(jid)).to include(jid: jid, state: :waiting, queue: "fair", tenant: "t#{i}"), jid.inspect
    end
    expect(why.call("a")).to eq(jid: "a", state: :unknown)
  end

  it "finds jobs outside fair queues: a plain queue's list, the scheduled set, or nowhere" do
    first = Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => "plainq", "args" => [1])
    2.times { |i| Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => "plainq", "args" => [i]) }
    expect(why.call(first)).to eq(jid: first, state: :queued, queue: "plainq", ahead: 0)
    later = Sidekiq::Client.push("class" => "ShownUncappedJob", "queue" => "plainq", "args" => [9])
    expect(why.call(later)[:ahead]).to eq(3)
    scheduled = ShownUncappedJob.perform_in(3600, "s", 0)
    expect(why.call(scheduled)).to include(state: :scheduled, queue: "fair")
    expect(why.call(scheduled)[:at]).to be > Time.now
    expect(why.call("nope")).to eq(jid: "nope", state: :unknown)
    expect { why.call("") }.to raise_error(ArgumentError, /FairQueues::Why.*jid/)
  end
end
