# frozen_string_literal: true

require "spec_helper"
require "tmpdir"
require_relative "../support/redis_stall"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"

class AuditedJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# A job in a live process's in-flight list that no thread of it runs (a fetch whose reply was lost to a busy
# Redis and which its client sent again; a job Sidekiq never acknowledged) goes back to the front of its tenant
# after two audits of the process's own list: on a real stall of the spec's redis-server, through a fetcher in
# this process whose Sidekiq connection has a short read timeout. The audits are called by hand.
RSpec.describe "Fair fetch: a process audits its own in-flight list" do
  let(:audit) { Sidekiq::FairTenant::FairFetch::Audit }
  let(:in_flight) { Sidekiq::FairTenant::FairFetch::InFlight }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } } # (spec_helper: no audit but by hand)
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  def fetcher(identity)
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, identity).tap do
      Sidekiq::FairTenant::FairFetch::Sweeper.stop
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  def audit!(fetch) = Sidekiq.redis { |conn| audit.run(conn, in_flight.ledger(fetch.inflight_key)) }
  def listed(fetch) = redis.hkeys(fetch.inflight_key).map(&:b)
  def jid(job) = JSON.parse(job)["jid"]
  def waiting(tenant = "acme") = redis.lrange("#{base}t:#{tenant}", 0, -1).map { |job| jid(job) }
  def entry_jid(fetch, field) = jid(redis.hget(fetch.inflight_key, field))

  # Four jobs pushed, then a fetch sent while Redis is busy past the read timeout: [jids, unit or nil, its entry,
  # the entries of the list that no unit stands for]. One job pushed before them is fetched and acknowledged
  # first, unstalled: the process's once-only calls (the format check's SET) are made, and the thread is not idle
  # (an idle thread's next fetch waits in a blocking call, whose read timeout outlasts the stall).
  def stalled_fetch(fetch, url)
    warm = AuditedJob.perform_async("acme", -1)
    jids = Array.new(4) { |i| AuditedJob.perform_async("acme", i) }
    first = fetch.retrieve_work
    expect(jid(first.job)).to eq(warm)
    first.acknowledge
    fetch.flush_acks
    fetch.redis { |conn| conn.call("PING") } # connected before the stall (redis-client's handshake would time out)
    stall = RedisStall.start(url, 1.6) # longer than the read timeout: the client sends the fetch again
    unit = begin
      fetch.retrieve_work
    rescue StandardError # both attempts timed out: no unit at all
      nil
    end
    stall.join
    sleep 0.2 # a call sent again after its client gave up runs all the same, once the loop has ended
    held = unit ? [unit.entry.b] : []
    [jids, unit, held, listed(fetch) - held]
  end

  # Every job fetched and acknowledged: nothing left in the list or waiting.
  def drain(fetch, unit)
    [unit, *Array.new(4) { fetch.retrieve_work }].compact.each(&:acknowledge)
    fetch.flush_acks
  end

  # (gc_stress: false: the fetch must be sent while the stall lasts, which GC.stress on every call would not keep.)
  it "puts back the job of a fetch whose reply was lost to a busy Redis, at the front of its tenant, once",
     gc_stress: false do
    url = ENV.fetch("REDIS_URL")
    with_sidekiq_redis(url: url, network_timeout: 0.5) do
      fetch = fetcher("audit-host:1:stall")
      # A stall can miss the call (sent on a connection whose handshake timed out: never run): then the jobs are
      # run and acknowledged, and the stall tried again, up to three times.
      jids, unit, held, stranded = nil
      3.times do
        jids, unit, held, stranded = stalled_fetch(fetch, url)
        break unless stranded.empty?

        drain(fetch, unit)
      end
      expect(stranded.size).to be_between(1, 2) # the first run's job (and the second's, if it timed out too)

      expect(audit!(fetch)).to eq(0) # a candidate: nothing moves yet
      expect(listed(fetch)).to match_array(stranded + held)
      stranded_jids = stranded.map { |field| entry_jid(fetch, field) }
      log = capture_log { expect(audit!(fetch)).to eq(stranded.size) }
      expect(log).to include("put #{stranded.size} in-flight job(s) that no thread of this process runs back")
      expect(listed(fetch)).to eq(held)
      expect(waiting.first(stranded.size)).to match_array(stranded_jids)
      expect(redis.lrange("#{base}t:acme", 0, -1).join).not_to include("fair_tenant_interrupted") # it never ran

      units = [unit, *Array.new(4 - held.size) { fetch.retrieve_work }].compact
      expect(units.map { |u| jid(u.job) }).to match_array(jids) # each handed out once: the stranded ones too
      expect(audit!(fetch) + audit!(fetch)).to eq(0) # all of them run here
      units.each(&:acknowledge)
      fetch.flush_acks
      expect(listed(fetch)).to eq([])
    end
  end

  it "puts back a job Sidekiq never acknowledged once the thread that ran it has ended" do
    first, second = Array.new(2) { |i| AuditedJob.perform_async("acme", i) }
    fetch = fetcher("audit-host:1:unacked")
    # A processor whose job's retry could not be written: it re-raises without acknowledging, its thread ends.
    dropped = Thread.new { fetch.retrieve_work }.value
    expect(jid(dropped.job)).to eq(first)

    expect(audit!(fetch)).to eq(0)
    expect(audit!(fetch)).to eq(1)
    expect(waiting).to eq([first, second])
    again = fetch.retrieve_work
    expect(jid(again.job)).to eq(first)
    expect(again.job).to eq(dropped.job) # as it was: no interruption counted
  end

  it "never puts back a job a thread runs, one whose acknowledgement is pending, or one whose fetch is under way" do
    3.times { |i| AuditedJob.perform_async("acme", i) }
    fetch = fetcher("audit-host:1:held")
    running = fetch.retrieve_work
    pending = fetch.retrieve_work
    ledger = in_flight.ledger(fetch.inflight_key)
    steps = Array.new(3) { Queue.new } # the reply comes back; the unit was handed out; its thread ends
    under_way = Thread.new do
      unit = in_flight.call(ledger) do # the fetch script ran; its reply is on its way until steps[0] pops
        want = Sidekiq::FairTenant::FairFetch::Batch::Want.new(%w[fair], false, Thread.current)
        reply = Sidekiq.redis { |conn| fetch.instance_variable_get(:@serving).fetch_once(conn, [want]) }
        steps[1] << :sent
        steps[0].pop
        fetch.instance_variable_get(:@serving).unit(reply.served.first, Thread.current)
      end
      steps[1] << :handed
      steps[2].pop
      unit
    end
    expect(steps[1].pop).to eq(:sent)
    pending.acknowledge # not sent: no fetch follows
    expect(listed(fetch).size).to eq(3)

    3.times { expect(audit!(fetch)).to eq(0) } # the fetch is under way
    steps[0] << true
    expect(steps[1].pop).to eq(:handed)
    2.times { expect(audit!(fetch)).to eq(0) } # a live thread runs it
    steps[2] << true
    late = under_way.value # its thread ended without acknowledging it: it runs nowhere now
    expect(audit!(fetch)).to eq(0)
    expect(audit!(fetch)).to eq(1)
    expect(waiting).to eq([jid(late.job)])
    expect(listed(fetch)).to match_array([running.entry.b, pending.entry.b])
    fetch.flush_acks
    expect(listed(fetch)).to eq([running.entry.b])
  end

  describe "in a real `sidekiq` process" do
    let(:servers) { [] }

    after { servers.each(&:stop) }

    let(:events) { File.join(Dir.mktmpdir("fair-audit"), "started") }

    def started = File.exist?(events) ? File.readlines(events).map(&:to_i) : []

    # Three stalls of Redis longer than the process's read timeout while 300 short jobs run on 5 threads (jobs
    # that do not touch Redis: a stall meets their threads' next fetches): fetches whose replies were lost leave
    # jobs in its in-flight list, which its audit (every second here) puts back. Every job runs once while the
    # process lives.
    it "runs every job once through Redis stalls that lose fetch replies, while the process lives" do
      300.times { |i| FileFairJob.perform_async("t#{i % 3}", i, 20) }
      url = ENV.fetch("REDIS_URL")
      env = { "FAIR_APP_NETWORK_TIMEOUT" => "0.5", "FAIR_APP_AUDIT_SECONDS" => "1", "FAIR_APP_EVENTS_FILE" => events }
      server = SidekiqProcess.new(redis_url: url, concurrency: 5, queues: %w[fair], env: env,
                                  app: File.expand_path("../support/fair_app.rb", __dir__)).start
      servers << server
      identity = wait_for("registered") { redis.smembers(Sidekiq::FairTenant::Native::Fair.registry_key).first }
      [40, 100, 160].each do |count|
        wait_for("#{count} jobs started") { started.size >= count }
        RedisStall.start(url, 1.2).join
      end
      wait_for("every job started", timeout: 60) { started.uniq.size == 300 }
      expect(server).to be_alive
      expect(started.tally.select { |_, n| n > 1 }).to eq({})
      wait_for("nothing left in flight") { redis.hlen(Sidekiq::FairTenant::Native::Fair.inflight_key(identity)).zero? }
      # The stalls did strand jobs (the warning is written once a minute).
      wait_for("the audit's warning", timeout: 30) { File.read(server.log).include?("in-flight job(s) that no thread") }
    end
  end
end
