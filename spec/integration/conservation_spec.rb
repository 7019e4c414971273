# frozen_string_literal: true

require "spec_helper"
require_relative "../support/conservation/run"

# Every job in exactly one place, whatever happens: a seeded random run of pushes, fetches, acks, requeues,
# crashes, graceful stops (Sidekiq's shutdown while capped jobs run), recoveries (some cut short between their
# calls), heartbeat lapses, slot lease time passing, weight and limit changes, refused writes, fair-off/on, calls
# whose reply was lost and that the client sent again, and each process's audit of its own in-flight list,
# checked after every step (spec/support/conservation); caps too: no running capped job loses its lease, and none
# starts while its scope runs its limit. A failure prints its seed and the steps before each kind of violation
# (CONSERVATION_HISTORY=<n> of them, 20 by default); replay with CONSERVATION_SEED=<seed>. Longer:
# CONSERVATION_STEPS=20000 (runs of CHUNK steps, seeds seed, seed + 1, ...). CONSERVATION_WITHOUT=garbage,lapse,
# refused,bytes,plain_slots leaves step kinds out (plain_slots: plain-queue jobs skip the server middleware);
# CONSERVATION_NOTES=1 prints what each run did (jobs fetched, recovered, run again after a crash or a stall,
# graceful stops, leases reclaimed, ...).
RSpec.describe "Conservation of jobs in fair queues" do
  chunk = 2000
  seed = (ENV["CONSERVATION_SEED"] || (Random.new_seed % (1 << 32))).to_i
  total = (ENV["CONSERVATION_STEPS"] || 1500).to_i
  runs = Array.new((total + chunk - 1) / chunk) { |i| [seed + i, [chunk, total - (i * chunk)].min] }

  before do
    # A fetch that finds nothing blocks in BRPOP for TIMEOUT: a short one keeps the run fast.
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    # A few jobs per recovery call, so that recoveries take several calls and can be cut between them.
    stub_const("Sidekiq::FairTenant::FairQueues::Recovery::ENTRIES", 2)
  end

  after do
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.now!
    Sidekiq::FairTenant::FairFetch::IdleLook::PACE.now!
  end

  runs.each do |run_seed, steps|
    it "keeps every job waiting, in flight, done or dead, once, and none runs again once its ack was applied " \
       "(seed #{run_seed}, #{steps} steps)" do
      run = Conservation::Run.new(seed: run_seed, steps: steps).call

      expect(run.violations).to be_empty, run.report
      expect(run.notes.values_at(:pushed, :fetched, :acks_applied)).to all(be_positive)
      puts "  seed #{run_seed}: #{run.notes.sort.map { |k, v| "#{k}=#{v}" }.join(" ")}" if ENV["CONSERVATION_NOTES"]
    end
  end
end

# What the random run found, one case each (the semantics fair fetch promises).
RSpec.describe "Conservation of jobs in fair queues, case by case" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:recovery) { Sidekiq::FairTenant::FairQueues::Recovery }
  let(:registry) { Sidekiq::FairTenant::Native::Fair.registry_key }

  before do
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    recovery::PACE.never! # sweeps only where the example calls them
  end

  after do
    recovery::PACE.now!
    redis.config(:set, "min-replicas-to-write", "0")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def fetcher(identity)
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, identity).tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  def heartbeat(identity)
    redis.hset(identity, "beat", Time.now.to_f.to_s)
    redis.expire(identity, 60)
  end

  def sweep(identity = "sweeper:1:a") = Sidekiq.redis { |conn| recovery.sweep(conn, identity) }

  # Recovery::LAPSE seconds pass on Redis's clock as the sweep reads it (every suspect's time moves back).
  def time_passes
    key = Sidekiq::FairTenant::Native::Fair.recovery_suspects_key
    redis.hgetall(key).each { |identity, since| redis.hset(key, identity, (since.to_f - recovery::LAPSE - 1).to_s) }
  end

  # A sweep suspects the process (its heartbeat key is gone), and the next, LAPSE seconds later, recovers it.
  def recover(identity)
    expect(sweep).to include(suspected: 1, recovered: 0)
    time_passes
    sweep
    expect(redis.hlen(Sidekiq::FairTenant::Native::Fair.inflight_key(identity))).to eq(0)
  end

  def in_flight(fetch) = redis.hkeys(fetch.inflight_key)
  def in_flight_jobs(fetch) = redis.hvals(fetch.inflight_key)
  def jid(unit) = JSON.parse(unit.job)["jid"]

  it "puts back the job of a dead process whose tenant name is not UTF-8, never drops it" do
    ConservedJob.perform_async("bytes", 1, "x")
    fetcher("dead:1:a").retrieve_work # no heartbeat key: as if it died right after

    recover("dead:1:a")

    expect(redis.llen("#{fair.base("fair")}t:#{Conservation::BYTES_TENANT}")).to eq(1)
    expect(redis.hget("#{fair.base("fair")}state", "n")).to eq("1")
  end

  it "keeps the acknowledgements pending when a fetch raises (writes refused), and sends them with the next" do
    3.times { |i| ConservedJob.perform_async("acme", i, "x") }
    fetch = fetcher("live:1:a")
    heartbeat("live:1:a")
    fetch.retrieve_work.acknowledge
    redis.config(:set, "min-replicas-to-write", "1")
    expect { fetch.retrieve_work }.to raise_error(/NOREPLICAS/)
    redis.config(:set, "min-replicas-to-write", "0")

    unit = fetch.retrieve_work

    expect(in_flight(fetch).size).to eq(1) # the job just fetched; the first one's ack went with this fetch
    expect(in_flight_jobs(fetch)).to eq([unit.job])
  end

  it "registers a process again on its next fetch when a sweep dropped it from the registry" do
    2.times { |i| ConservedJob.perform_async("acme", i, "x") }
    fetch = fetcher("live:2:a")
    fetch.retrieve_work.acknowledge
    fetch.flush_acks
    sweep # its heartbeat key is missing (a stall): suspected, then, LAPSE seconds on, its empty list is forgotten
    time_passes
    sweep
    expect(redis.sismember(registry, "live:2:a")).to be(false)
    heartbeat("live:2:a")

    fetch.retrieve_work

    expect(redis.sismember(registry, "live:2:a")).to be(true)
  end

  it "leaves a live process's jobs in flight when its heartbeat key was deleted a moment ago" do
    ConservedJob.perform_async("acme", 1, "x")
    fetch = fetcher("live:3:a")
    heartbeat("live:3:a")
    unit = fetch.retrieve_work
    redis.del("live:3:a") # one beat lapsed; Sidekiq writes the key again within BEAT_PAUSE

    2.times { sweep }
    heartbeat("live:3:a")
    time_passes
    sweep

    expect(in_flight(fetch)).to eq([unit.entry])
    expect(redis.hlen(Sidekiq::FairTenant::Native::Fair.recovery_suspects_key)).to eq(0)
  end

  it "sends a recovered payload that is not a JSON object to the dead set, never back and never nowhere" do
    payloads = ["[\"garbage-1\"]", "\"garbage-2\"", "garbage-3 not json \xff\xfe".b]
    redis.sadd(registry, "dead:4:a")
    payloads.each { |job| redis.lpush(Sidekiq::FairTenant::Native::Fair.inflight_key("dead:4:a"), "4:fair1:a#{job}".b) }

    recover("dead:4:a")

    dead = redis.zrange("dead", 0, -1).map(&:b)
    expect(%w[garbage-1 garbage-2 garbage-3].map do |marker|
             dead.count do |job|
               job.include?(marker)
             end
           end).to eq([1, 1, 1])
    expect(redis.hget("#{fair.base("fair")}state", "n").to_i).to eq(0)
  end

  it "fetches past a JSON array pushed raw to a fair queue (the payload to the dead set, the queue not stuck)" do
    redis.lpush("queue:fair", "[\"garbage-5\"]")
    jid = ConservedJob.perform_async("acme", 1, "x")
    fetch = fetcher("live:6:a")

    unit = fetch.retrieve_work
    expect(jid(unit)).to eq(jid) # served first; the thread adopts queue:fair's jobs at its next call
    expect(redis.llen("queue:fair")).to eq(1)

    expect(fetch.retrieve_work).to be_nil # adopted: to the dead set; then nothing to serve
    expect(redis.zrange("dead", 0, -1)).to eq(["[\"garbage-5\"]"])
    expect(redis.llen("queue:fair")).to eq(0)
  end

  # Seed 509: a stalled process, taken for dead, fetched its own recovered copy of a capped job while the first
  # copy still ran; the first copy's end stopped the heartbeat renewing the jid's lease while the second ran.
  it "renews a job's lease while a second copy of it runs in the same process, after the first copy ended" do
    slots = Sidekiq::FairTenant::Concurrency::Slots
    copies = Array.new(2) { Sidekiq::FairTenant::ServerMiddleware::Slot.new("t", "s", "j14", 60_000, 1) }
    copies.each { |copy| slots.running(copy) }
    slots.finished(copies.first)
    expect(slots.running_slots.map(&:jid)).to eq(["j14"])
    slots.finished(copies.last)
    expect(slots.running_slots).to be_empty
  ensure
    slots.stop
  end
end
