# frozen_string_literal: true

require "spec_helper"

class BatchedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# Threads of one fetcher that want a job at the same moment share one fetch call (FairFetch::Batch), and a
# thread that leaves while it waits gives its job back. Real threads on the spec's redis-server; the calls are
# held at a gate where a spec needs a thread to queue behind one.
RSpec.describe "Fair fetch: threads that wait at the same moment share one call" do
  let(:batch_class) { Sidekiq::FairTenant::FairFetch::Batch }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }
  let(:fetch) do
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "batch-host:1:a").tap do
      Sidekiq::FairTenant::FairFetch::Sweeper.stop
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def jid(job) = JSON.parse(job)["jid"]
  def waiting(tenant) = redis.lrange("#{base}t:#{tenant}", 0, -1).map { |job| jid(job) }
  def listed = redis.hvals(fetch.inflight_key).map { |job| jid(job) }

  def fetch_calls
    stats = redis.info("commandstats")
    %w[fcall evalsha eval].sum { |cmd| stats.fetch(cmd, {}).fetch("calls", 0).to_i }
  end

  def queued(batch) = batch.instance_variable_get(:@queued)

  def until_true
    200.times do
      return if yield

      sleep 0.01
    end
    raise "timed out"
  end

  # A thread taking a job through `batch`, its call held at `gate` (one pop per call). Its Want, or its error.
  def taker(batch, gate)
    Thread.new do
      batch.take(%w[fair], false) do |wants|
        gate.pop
        state = Sidekiq::FairTenant::FairFetch::ThreadStates::State.new # the calling thread's
        Sidekiq.redis { |conn| fetch.instance_variable_get(:@serving).serve(conn, wants, state) }
      end
    rescue Sidekiq::Shutdown => e
      e
    end
  end

  it "serves every thread that queued behind a call with the next call, in the order single fetches give" do
    jids = Array.new(6) { |i| BatchedJob.perform_async(%w[acme bolt cove][i % 3], i) }
    batch = batch_class.new
    gate = Queue.new
    first = taker(batch, gate)
    until_true { batch.instance_variable_get(:@calling) }
    rest = Array.new(4) { taker(batch, gate) }
    until_true { queued(batch).size == 4 }
    in_line = [first, *queued(batch).map(&:thread)]
    calls = fetch_calls
    2.times { gate << true } # the first call, then one for the four that queued meanwhile
    wants = in_line.map(&:value)
    expect(fetch_calls - calls).to eq(2)
    served = wants.map { |want| jid(want.unit.job) }
    # Fair order (acme, bolt, cove, then acme again) in the order the threads queued; the first call served
    # the first thread alone.
    expect(rest).to match_array(in_line.drop(1))
    expect(served).to eq(jids.first(5))
    expect(listed.sort).to eq(jids.first(5).sort)
    expect(waiting("cove")).to eq([jids[5]])
  end

  it "serves at most FETCH_BATCH threads a call, each want once" do
    jids = Array.new(40) { |i| BatchedJob.perform_async("t#{i % 7}", i) }
    batch = batch_class.new
    gate = Queue.new
    first = taker(batch, gate)
    until_true { batch.instance_variable_get(:@calling) }
    rest = Array.new(batch_class::MAX + 3) { taker(batch, gate) }
    until_true { queued(batch).size == batch_class::MAX + 3 }
    calls = fetch_calls
    3.times { gate << true } # the first call, then MAX of those queued, then the last 3
    units = [first, *rest].map { |thread| thread.value.unit }
    expect(fetch_calls - calls).to eq(3)
    expect(units.map { |unit| jid(unit.job) }.uniq.size).to eq(batch_class::MAX + 4)
    expect(listed.sort).to eq(units.map { |unit| jid(unit.job) }.sort)
    expect(listed.size + (0...7).sum { |t| waiting("t#{t}").size }).to eq(jids.size)
  end

  it "gives back nothing when a thread leaves before a call took it" do
    jids = Array.new(3) { |i| BatchedJob.perform_async("acme", i) }
    batch = batch_class.new
    gate = Queue.new
    first = taker(batch, gate)
    until_true { batch.instance_variable_get(:@calling) }
    leaving = taker(batch, gate)
    until_true { queued(batch).size == 1 }
    leaving.raise(Sidekiq::Shutdown)
    expect(leaving.value).to be_a(Sidekiq::Shutdown)
    expect(queued(batch)).to be_empty
    gate << true
    expect(jid(first.value.unit.job)).to eq(jids[0])
    expect(listed).to eq([jids[0]])
    expect(waiting("acme")).to eq(jids.drop(1))
  end

  it "puts back at the front of its tenant the job a call served for a thread that left meanwhile" do
    jids = Array.new(4) { |i| BatchedJob.perform_async("acme", i) }
    batch = batch_class.new
    gate = Queue.new
    first = taker(batch, gate)
    until_true { batch.instance_variable_get(:@calling) }
    2.times { taker(batch, gate) }
    until_true { queued(batch).size == 2 }
    leader, leaving = queued(batch).map(&:thread) # the first queued makes the next call
    gate << true # the first call ends; the next takes both queued threads and waits at the gate
    until_true { queued(batch).empty? && batch.instance_variable_get(:@calling) }
    leaving.raise(Sidekiq::Shutdown)
    expect(leaving.value).to be_a(Sidekiq::Shutdown)
    gate << true # the call serves both; the leaving thread's job goes back
    expect([first, leader].map { |thread| jid(thread.value.unit.job) }).to eq(jids.first(2))
    expect(listed.sort).to eq(jids.first(2).sort)
    expect(waiting("acme")).to eq(jids.drop(2)) # jids[2] back in front of jids[3]
  end

  it "adopts jobs pushed straight to queue:fair for the threads of a call that found nothing in fair order" do
    jids = Array.new(3) { |i| "raw#{i}" }
    jids.each do |jid|
      redis.lpush("queue:fair",
                  JSON.generate("class" => "BatchedJob", "args" => ["acme", jid], "jid" => jid, "queue" => "fair"))
    end
    batch = batch_class.new
    gate = Queue.new
    first = taker(batch, gate)
    until_true { batch.instance_variable_get(:@calling) }
    rest = Array.new(2) { taker(batch, gate) }
    until_true { queued(batch).size == 2 }
    2.times { gate << true }
    served = [first, *rest].map { |thread| jid(thread.value.unit.job) }
    expect(served).to match_array(jids)
    expect(listed).to match_array(jids)
  end

  it "raises a failed call's error in every thread it was made for" do
    BatchedJob.perform_async("acme", 0)
    batch = batch_class.new
    gate = Queue.new
    first = Thread.new do
      batch.take(%w[fair], false) do |_wants|
        gate.pop
        Sidekiq.redis { |conn| conn.call("NOT-A-COMMAND") } # refused by Redis: the call fails
      end
    rescue StandardError => e
      e
    end
    until_true { batch.instance_variable_get(:@calling) }
    second = taker(batch, gate)
    gate << true
    gate << true
    expect(first.value).to be_a(StandardError).and(have_attributes(message: /unknown command/))
    expect(jid(second.value.unit.job)).to be_a(String) # queued behind the failed call: served by the next
  end
end
