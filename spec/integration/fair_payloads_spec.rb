# frozen_string_literal: true

require "spec_helper"
require_relative "../support/odd_payloads"

# Jobs with odd values in every field a fair queue's scripts read (enqueued_at, created_at, jid, the slot and
# rate fields, the whole payload), pushed raw to `queue:fair` (adopted), through the client, or left in a dead
# process's in-flight list (recovered), mixed with valid jobs of several tenants, then drained by two fetchers.
# Redis never rolls a script back: a script that failed after its first write would lose jobs or a tenant.
# Seeded: a failure prints its seed; replay with FAIR_PAYLOADS_SEED=<seed> (FAIR_PAYLOADS_JOBS: how many).
RSpec.describe "Fair queues fed odd payloads" do
  seed = (ENV["FAIR_PAYLOADS_SEED"] || (Random.new_seed % (1 << 32))).to_i
  jobs = (ENV["FAIR_PAYLOADS_JOBS"] || 160).to_i

  before do
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.never!
  end

  after do
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.now!
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  it "runs every valid job once, runs or kills every odd one, loses none and keeps every tenant " \
     "(seed #{seed}, #{jobs} payloads)" do
    run = OddPayloads::Run.new(seed: seed, jobs: jobs).call

    expect(run.violations).to be_empty, run.report
    expect(run.counts.values_at(:valid, :odd, :ran, :dead)).to all(be_positive), run.report
  end

  # The issue's case: a fetch adopts the first FairFetch::ADOPT_FIRST jobs, the next call the rest in one batch,
  # where a job of "other" comes first and the first job of "acme" (so adoption reads its time) says "nan".
  it "serves every job of an adoption batch with enqueued_at \"nan\" in its middle, and keeps its tenant" do
    run = OddPayloads::Run.new(seed: seed, jobs: 0)
    tenants = %w[other other other acme acme other acme]
    markers = tenants.each_with_index.map { |t, i| run.raw_push(t, i == 3 ? { "enqueued_at" => '"nan"' } : {}) }

    run.drain
    later = run.client_push("acme") # pushed after the bad job: its tenant is still in the rotation
    run.drain

    expect(run.violations).to be_empty, run.report
    expect(run.ran.values_at(*markers, later)).to all(eq(1)) # the bad one too: adopted with the time of its adoption
    expect(run.min_size).to be >= 0
  end
end

# A fair queue by worker time reads the means it learnt, and weights: values a hand may have written too.
RSpec.describe "Fair queues fed odd stored values" do
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:fair) { Sidekiq::FairTenant::FairQueues }

  before do
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair:time] }
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  it "serves a tenant whose weight and mean run time were written by hand as \"nan\"" do
    redis.hset(fair::WEIGHTS_KEY, "acme", "nan")
    redis.hset(fair.key("fair", names::RUNTIMES), "acme", "nan")
    redis.hset(fair.key("fair", names::STATE), names::STATE_MEAN, "inf")
    jids = Array.new(3) { |i| OddPayloadJob.perform_async("acme", i) }
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "odd:3:a")

    served = Array.new(3) { fetch.retrieve_work.tap(&:acknowledge) }
    fetch.flush_acks

    expect(served.map { |unit| JSON.parse(unit.job)["jid"] }).to eq(jids)
    expect(fair.backlog(redis, "fair")).to eq(0)
  end
end

# The slot scripts read values a hand may have written (parked payloads, runtime limits, suspects' times):
# read before their first write too.
RSpec.describe "Slot and recovery scripts fed odd stored values" do
  let(:slots) { Sidekiq::FairTenant.native.slots }
  let(:scope) { Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default") }
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:parked_key) { "#{names::SLOTS_PREFIX}#{scope[0].bytesize}:#{scope[0]}:#{scope[1]}#{names::PARKED}" }
  let(:limits_key) { "#{names::LIMITS_PREFIX}#{scope[0].bytesize}:#{scope[0]}" }

  def acquire(jid, enqueued_at = Time.now.to_f)
    job = JSON.generate("class" => "SlotJob", "queue" => "default", "args" => ["acme"], "jid" => jid,
                        "enqueued_at" => enqueued_at)
    slots.acquire(scope[0], scope[1], jid, 60_000, 1, job, enqueued_at)
  end

  it "sends a parked payload that is no job to the dead set when a slot frees, and hands the slot on" do
    expect(acquire("a")).to eq(:acquired)
    expect(acquire("b")).to eq(:parked)
    redis.zadd(parked_key, 1, "not a job mk1x") # the oldest parked: first in line

    expect(slots.release(scope[0], scope[1], "a", 60_000, 1)).to eq(1)

    expect(redis.zrange("dead", 0, -1)).to eq(["not a job mk1x"])
    expect(JSON.parse(redis.lindex("queue:default", -1))["jid"]).to eq("b")
  end

  it "passes over a runtime limit written by hand that is not a number (the class's limit holds)" do
    redis.hset(limits_key, scope[1], "nan")
    expect(acquire("a")).to eq(:acquired)
    expect(acquire("b")).to eq(:parked)

    expect(slots.release(scope[0], scope[1], "a", 60_000, 1)).to eq(1)
  end

  it "suspects from now a process whose suspect time was written by hand as \"nan\"" do
    registry = Sidekiq::FairTenant::Native::Fair.registry_key
    suspects = Sidekiq::FairTenant::Native::Fair.recovery_suspects_key
    redis.sadd(registry, "gone:2:x")
    redis.hset(suspects, "gone:2:x", "nan")

    result = Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues::Recovery.sweep(conn, "sweeper:1:a") }

    expect(result).to include(suspected: 1, recovered: 0)
    expect(redis.hget(suspects, "gone:2:x").to_f).to be_within(60).of(Time.now.to_f)
  end
end
