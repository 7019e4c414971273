# frozen_string_literal: true

require "spec_helper"

class CopyCapJob
  include Sidekiq::Job

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 2, lease: 600 }

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

class ElasticCopyCapJob
  include Sidekiq::Job

  sidekiq_options queue: "fair", retry: false, fair_tenant_concurrency: { limit: 1, lease: 600, elastic: true }

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# Two copies of one job in a fair queue (a single push sent again after a lost reply, a client pushing one jid
# twice): slots are held per jid, so a copy served while the other holds the slot would run without one of its
# own, and the first copy's acknowledgement would free the slot while the second runs. A copy of a job that
# holds its slot waits until the slot is given back.
RSpec.describe "Caps inside fair queues: copies of one job" do
  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def fetcher(identity)
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, identity)
  end

  def scope_key(tenant, field)
    tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, "fair")
    "sidekiq-fair_tenant:slots:#{tag.bytesize}:#{tag}:#{sub}:#{field}"
  end

  def holders(tenant) = redis.zrange(scope_key(tenant, "holders"), 0, -1)
  def served(unit) = unit && JSON.parse(unit.job).values_at("jid", "args")

  # Waits no longer than a fetch that finds nothing blocks (FairFetch::TIMEOUT).
  def fetch(fetcher) = served(fetcher.retrieve_work)

  def ack(fetcher, unit)
    unit.acknowledge
    fetcher.flush_acks
  end

  def now_ms = redis.time.then { |s, us| (s * 1000) + (us / 1000) }

  it "runs J, K under a limit of 2, not J, its copy and K; the copy runs once J's first copy ends, L after" do
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 1], "jid" => "J")
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 1], "jid" => "J") # the same push again
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 3], "jid" => "K")
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 4], "jid" => "L")
    one = fetcher("host:1:a")
    two = fetcher("host:2:b")

    first = one.retrieve_work
    expect(served(first)).to eq(["J", ["bravo", 1]])
    # The copy is held back (its tenant waits on the scope with a slot free), and K, L wait behind it (FIFO).
    expect(fetch(two)).to be_nil
    expect(holders("bravo")).to eq(%w[J])

    ack(one, first) # J's first copy ends: the slot is given back, the copy's tenant woken
    second = two.retrieve_work
    expect(served(second)).to eq(["J", ["bravo", 1]])
    third = one.retrieve_work
    expect(served(third)).to eq(["K", ["bravo", 3]])
    expect(holders("bravo")).to contain_exactly("J", "K")
    expect(fetch(one)).to be_nil # L waits: two run

    ack(two, second)
    expect(fetch(two)).to eq(["L", ["bravo", 4]])
    expect(holders("bravo")).to contain_exactly("K", "L")
  end

  it "holds the copy back under an elastic cap too (never served past the limit), while others run" do
    Sidekiq::Client.push("class" => ElasticCopyCapJob, "args" => ["echo", 1], "jid" => "E")
    Sidekiq::Client.push("class" => ElasticCopyCapJob, "args" => ["echo", 1], "jid" => "E")
    Sidekiq::Client.push("class" => ElasticCopyCapJob, "args" => ["echo", 2], "jid" => "F")
    one = fetcher("host:1:a")

    first = one.retrieve_work
    expect(served(first)).to eq(["E", ["echo", 1]])
    expect(fetch(one)).to be_nil # an elastic tenant past its limit is served when nobody is ready: not a copy
    expect(holders("echo")).to eq(%w[E])

    ack(one, first)
    expect(fetch(one)).to eq(["E", ["echo", 1]])
    expect(fetch(one)).to eq(["F", ["echo", 2]]) # elastic: past the limit, nobody else waits
    expect(holders("echo")).to contain_exactly("E", "F")
  end

  it "serves a job whose slot a plain queue's release handed over to it (adopted from queue:<name>)" do
    redis.zadd(scope_key("bravo", "holders"), now_ms + 600_000, "H")
    redis.hset(scope_key("bravo", "runs"), "H", "^run-that-parked-it")
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 1], "jid" => "H")

    expect(fetch(fetcher("host:1:a"))).to eq(["H", ["bravo", 1]])
    expect(holders("bravo")).to eq(%w[H])
    expect(redis.hget(scope_key("bravo", "runs"), "H")).to be_nil
  end

  it "holds back a copy of a job whose slot a plain queue's run holds" do
    redis.zadd(scope_key("bravo", "holders"), now_ms + 600_000, "P")
    redis.hset(scope_key("bravo", "runs"), "P", "a-plain-run")
    Sidekiq::Client.push("class" => CopyCapJob, "args" => ["bravo", 1], "jid" => "P")
    one = fetcher("host:1:a")

    expect(fetch(one)).to be_nil
    expect(holders("bravo")).to eq(%w[P])
  end
end
