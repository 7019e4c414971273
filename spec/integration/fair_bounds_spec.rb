# frozen_string_literal: true

require "spec_helper"
require_relative "../support/fair_app"

# Issue 30 item 6: a call's work is bounded by what it does, not by what it meets. Counted, never timed:
# commands a call runs (INFO commandstats, those run inside scripts included) and script calls made.
RSpec.describe "Fair calls bounded by work" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:runner) { Sidekiq::FairTenant::ScriptRunner }
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:base) { fair.base("fair") }
  let(:shared) { ["#{names::KEY_TAG}shared", names::KEY_SUB, 1, 600_000, 0] }
  let(:waiting) { "#{names::SLOTS_PREFIX}#{shared[0].size}:#{shared[0]}:#{shared[1]}#{names::WAITING}" }
  let(:index) { "#{waiting}#{names::WAITING_INDEX}" }
  let(:fetch) do
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "bounds:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    # Sweeps only where the example calls them: the sweeper thread its fetcher starts would finish a clear the
    # example leaves half done.
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.never!
  end

  after do
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.now!
    Sidekiq::FairTenant::Concurrency::Slots.stop
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def job(index, tenant, slot: nil, pad: nil)
    job = { "class" => "FairJob", "queue" => "fair", "args" => [index, pad].compact, "jid" => "j#{index}",
            "enqueued_at" => Time.now.to_f }
    job[names::SLOT_FIELD] = slot if slot
    [tenant, JSON.generate(Sidekiq::FairTenant::FairQueues::JobBytes.head_first(job))]
  end

  def push(pairs) = Sidekiq.redis { |conn| fair.push(conn, "fair", pairs) }

  # One fetch call for one thread: the job it served (queue, tenant, job, entry, ...), or nil.
  def fetch_once
    want = Sidekiq::FairTenant::FairFetch::Batch::Want.new(%w[fair], false, Thread.current)
    Sidekiq.redis { |conn| fetch.instance_variable_get(:@serving).fetch_once(conn, [want]).served.first }
  end

  # {command => calls} run by the block (script calls and the commands they ran).
  def commands
    before = calls
    yield
    calls.to_h { |name, count| [name, count - before.fetch(name, 0)] }.select { |_, count| count.positive? }
  end

  # Calls that ran to their end (an FCALL refused for a library not loaded yet, then loaded, counts once).
  def calls = redis.info("commandstats").transform_values { |stats| stats["calls"].to_i - stats["failed_calls"].to_i }

  context "with more tenants held back on one shared scope than a read of its waiters may cover" do
    let(:held) { names::WAITING_SCAN_MAX + 50 }

    # Every tenant has two jobs on the scope (limit 1): the first fetch serves one, the rest are held back.
    before do
      push(Array.new(held * 2) { |i| job(i, "t#{i % held}", slot: shared) })
      @served = fetch_once
      fetch_once while redis.zcard("#{base}#{names::CAPPED}") < held
    end

    it "keeps an index entry per waiting entry" do
      expect(redis.zcard(waiting)).to eq(held) # the holder's tenant too: its next job waits on the scope
      expect(redis.hlen(index)).to eq(redis.zcard(waiting))
      entry = redis.zrange(waiting, 0, 0).first
      field = entry[1..].sub(/\A(\d+:fair)\h{#{names::ACTIVATION_DIGITS}}/, '\1')
      expect(redis.hget(index, field)).to eq(entry)
    end

    it "requeues the holder's job, its tenant found through the index: no read of the waiting set" do
      tenant = @served.tenant
      ran = commands { fetch.finish("requeue", [@served.entry]) }

      expect(ran.keys & %w[zrange zscan zrangebyscore]).to eq([])
      expect(ran.values.sum).to be < 60
      members = redis.zrange("#{base}#{names::READY}", 0, -1).map { |m| m[names::ACTIVATION_DIGITS..] }
      expect(members).to include(tenant) # back in the rotation: the job put in front may run now
      expect(redis.hlen(index)).to eq(redis.zcard(waiting))
    end

    it "wakes the held tenants of a raised limit at most HAND_OVER_BATCH a call" do
      ran = commands { Sidekiq::FairTenant.limits.set(10_000, key: "shared") }

      calls = ran.slice("evalsha", "eval", "fcall").values.sum
      expect(calls).to be >= ((held - 1) / names::HAND_OVER_BATCH) + 1
      expect(redis.zcard("#{base}#{names::CAPPED}")).to eq(0)
      expect(redis.zcard("#{base}#{names::READY}")).to eq(held) # every tenant back in the rotation
      expect(redis.zcard(waiting)).to eq(0)
    end

    it "deletes a held tenant's oldest job, its waiting entry found through the index: no scan" do
      tenant = "t#{held / 2}"
      oldest = redis.lindex("#{base}#{names::TENANT_LIST}#{tenant}", 0)
      ran = commands { Sidekiq::FairTenant::FairQueues::Backlog.delete("fair", oldest, tenant) }

      expect(ran.keys & %w[zrange zscan]).to eq([])
      expect(ran.values.sum).to be < 60
      expect(redis.hget(index, "4:fair#{tenant}")).to be_nil
      expect(redis.hlen(index)).to eq(redis.zcard(waiting))
    end
  end

  context "with a few tenants held back, their waiting entries written without the index (a rolling upgrade)" do
    before do
      push(Array.new(6) { |i| job(i, "t#{i % 3}", slot: shared) })
      @served = fetch_once
      fetch_once while redis.zcard("#{base}#{names::CAPPED}") < 3
      redis.del(index)
    end

    it "finds the held tenant's entry by reading the scope's waiters (at most WAITING_SCAN_MAX)" do
      fetch.finish("requeue", [@served.entry])

      members = redis.zrange("#{base}#{names::READY}", 0, -1).map { |m| m[names::ACTIVATION_DIGITS..] }
      expect(members).to include(@served.tenant)
    end
  end

  context "with many tenants of one job each (the members index: a tenant's place without walking the tiers)" do
    before { push(Array.new(2_000) { |i| job(i, "t#{i}") }) }

    it "answers `why` for a tenant's job and deletes a tenant's only job with no ZSCAN of the tiers" do
      why = nil
      ran = commands do
        why = Sidekiq::FairTenant.why("j1500")
        Sidekiq::FairTenant::FairQueues::Backlog.delete("fair", redis.lindex("#{base}#{names::TENANT_LIST}t7", 0), "t7")
      end

      expect(why).to include(place: :ready)
      expect(ran.keys & %w[zscan]).to eq([])
      expect(ran["fcall"]).to be <= 4 # find the jid (a page of heads), why, delete
      expect(redis.hlen("#{base}#{names::MEMBERS}")).to eq(1_999)
    end
  end

  context "with jobs near a megabyte" do
    let(:pad) { "x" * (names::CALL_BYTES * 0.6).to_i }
    let(:pairs) { Array.new(5) { |i| job(i, "t#{i % 2}", pad: pad) } }

    it "pushes at most CALL_BYTES past a call's first job" do
      ran = commands { push(pairs) }

      expect(ran["fcall"]).to eq(3) # 2 + 2 + 1
      expect(fair.backlog(redis, "fair")).to eq(5)
    end

    it "reads a page of the backlog in calls of at most CALL_BYTES past the first job" do
      push(pairs)
      got = nil
      ran = commands { got = Sidekiq::Queue.new("fair").map(&:jid) }

      expect(got).to match_array(Array.new(5) { |i| "j#{i}" })
      expect(ran["fcall"]).to be >= 3
    end

    it "drains in calls of at most CALL_BYTES past the first job" do
      push(pairs)
      replies = []
      3.times do
        replies << Sidekiq.redis do |conn|
          runner.run(conn, "drain", ["queue:fair", fair::WEIGHTS_KEY], [base, "fair", names::DRAIN_BATCH])
        end
      end

      expect(replies).to eq([[2, 1], [2, 1], [1, 0]])
      expect(redis.llen("queue:fair")).to eq(5)
    end

    it "puts back at most CALL_BYTES of held-back tenants' head jobs past the first in one fetch" do
      push(Array.new(4) { |i| job(i, "h#{i}", slot: shared, pad: pad) })
      expect(fetch_once).not_to be_nil # served: the scope (limit 1) is full now
      capped = "#{base}#{names::CAPPED}"

      expect(fetch_once).to be_nil
      expect(redis.zcard(capped)).to eq(2) # 2 x 0.6 MB put back: the rest is left to the next call
      expect(fetch_once).to be_nil
      expect(redis.zcard(capped)).to eq(3)
    end

    it "adopts from queue:<name> at most CALL_BYTES past the oldest job per call" do
      raw = Array.new(3) do |i|
        JSON.generate("class" => "FairJob", "queue" => "fair", "args" => ["t#{i}", pad], "jid" => "raw#{i}",
                      "enqueued_at" => Time.now.to_f)
      end
      redis.lpush("queue:fair", raw)
      adopted = Array.new(4) { Sidekiq.redis { |conn| fair.adopt(conn, "fair", 100) } }

      expect(adopted).to eq([1, 1, 1, 0]) # 0.6 MB each: another would not fit in the rest of CALL_BYTES
      expect(fair.backlog(redis, "fair")).to eq(3)
    end

    it "clears held-back tenants in calls reading at most CALL_BYTES of their head jobs past the first" do
      push(Array.new(4) { |i| job(i, "h#{i}", slot: shared, pad: pad) })
      fetch_once # h0 served: the scope is full
      fetch_once while redis.zcard("#{base}#{names::CAPPED}") < 3
      replies = Array.new(2) { Sidekiq.redis { |conn| runner.run(conn, "clear", [], [base, "fair", 200]) } }

      expect(replies).to eq([[2, 1], [1, 0]])
      expect(redis.zcard(waiting)).to eq(0)
      expect(redis.exists?(index)).to be(false)
    end

    it "requeues in-flight jobs in calls of at most CALL_BYTES past the first entry" do
      push(pairs)
      entries = Array.new(5) { fetch_once[3] }
      ran = commands { expect(fetch.finish("requeue", entries)).to eq(5) }

      expect(ran["fcall"]).to eq(3)
      expect(fair.backlog(redis, "fair")).to eq(5)
    end
  end
end
