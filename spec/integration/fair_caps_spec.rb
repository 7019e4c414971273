# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_caps_app"

# Concurrency caps inside a fair queue, on real `sidekiq` server processes (Sidekiq 6.4 or 7.3, whichever the
# bundle has): the fetcher takes a job's slot with the job; a tenant at a static limit leaves the rotation until
# one of its jobs finishes; an elastic limit gives the tenant threads nobody under its limit can use.
RSpec.describe "Caps inside fair queues" do
  let(:servers) { [] }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def start_server(concurrency:, queues: %w[fair plain], args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, queues: queues, args: args,
                       app: File.expand_path("../support/fair_caps_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def events = redis.lrange(FairCapsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def starts(scope = nil) = events.select { |e| e["event"] == "start" && (scope.nil? || e["scope"] == scope) }
  def finished(scope = nil) = events.count { |e| e["event"] == "finish" && (scope.nil? || e["scope"] == scope) }

  # [time, running] after each start and finish of the scope's jobs, in time order.
  def running_steps(scope)
    running = 0
    events.select { |e| e["scope"] == scope }
          .sort_by { |e| [e["at"], e["event"] == "start" ? 1 : 0] }
          .map { |e| [e["at"], running += e["event"] == "start" ? 1 : -1] }
  end

  def max_running(scope) = running_steps(scope).map(&:last).max

  # Time-weighted mean of the scope's running jobs between two moments.
  def mean_running(scope, from, to)
    steps = running_steps(scope)
    level = steps.reverse.find { |at, _| at <= from }&.last || 0
    area = 0.0
    at = from
    steps.each do |t, running|
      next if t <= from
      break if t >= to

      area += level * (t - at)
      at = t
      level = running
    end
    (area + (level * (to - at))) / (to - from)
  end

  def scope_keys(tenant, queue = "fair")
    tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, queue)
    slots = "sidekiq-fair_tenant:slots:#{tag.bytesize}:#{tag}:#{sub}"
    { holders: "#{slots}:holders", parked: "#{slots}:parked", waiting: "#{slots}:waiting" }
  end

  def capped_tenants = redis.zrange("#{base}capped", 0, -1).map { |member| member[16..] }

  it "never runs more than a static limit with 4 processes x 10 threads; nothing parked, fetched twice or delayed" do
    4.times { start_server(concurrency: 10) }
    wait_for("4 processes up") { redis.scard("processes") == 4 }
    120.times { |i| StaticCapJob.perform_async("A", i, 20) }
    30.times { |i| UncappedFairJob.perform_async("B#{i % 3}", i, 20) }
    wait_for("150 jobs") { finished == 150 }

    expect(starts.size).to eq(150)
    expect(starts.map { |e| e["jid"] }.uniq.size).to eq(150)
    expect(max_running("A")).to eq(2)
    expect(starts.map { |e| e["pid"] }.uniq.size).to be > 1 # several processes fetched (A's slots are shared)

    # Every other tenant ran while A still had most of its backlog.
    others_done = events.select { |e| e["event"] == "finish" && e["scope"] != "A" }.map { |e| e["at"] }.max
    expect(others_done).to be < starts("A").map { |e| e["at"] }.sort[60]
    # FIFO per tenant: only the two running at once can overtake each other.
    order = starts("A").sort_by { |e| e["at"] }.map { |e| e["index"] }
    expect(order.each_with_index.map { |index, position| (index - position).abs }.max).to be <= 1

    expect(redis.llen(FairCapsApp::PARKED)).to eq(0) # no job was parked, so none was fetched twice or re-pushed
    wait_for("A's slots given back") { redis.zcard(scope_keys("A")[:holders]).zero? }
    expect(redis.zcard("#{base}capped") + redis.zcard("#{base}over")).to eq(0)
  end

  it "elastic: a tenant alone uses every thread" do
    40.times { |i| ElasticCapJob.perform_async("A", i, 150) }
    start_server(concurrency: 8, queues: %w[fair])
    wait_for("40 jobs") { finished == 40 }

    expect(max_running("A")).to eq(8)
  end

  it "elastic: two backlogged tenants keep every thread busy and split them; a tenant under its limit goes first" do
    30.times do |i|
      ElasticCapJob.perform_async("A", i, 1000)
      ElasticCapJob.perform_async("B", i, 1000)
    end
    start_server(concurrency: 8, queues: %w[fair])
    wait_for("8 running") { starts.size >= 8 }
    sleep 1.5
    pushed = Process.clock_gettime(Process::CLOCK_REALTIME)
    ElasticCapJob.perform_async("C", 0, 10)
    c_start = wait_for("C's job") { starts("C").first }["at"]
    wait_for("61 jobs") { finished == 61 }

    # The next free thread went to C: no job of A or B started between its push and its start. Jobs of 1 s
    # started together finish together, so threads fetch in bursts: a job fetched just before the push, or by
    # another thread of C's burst, may record its start up to a scheduling delay later (0.2 s and 0.3 s here).
    expect(starts.count { |e| e["scope"] != "C" && e["at"].between?(pushed + 0.2, c_start - 0.3) }).to eq(0)
    expect(c_start - pushed).to be < 1.2 # one job length (1 s), and the fetch

    # While both had a backlog (A and B started together; from the 8th start to 2 s before the last start):
    first_full = starts.map { |e| e["at"] }.sort[7]
    last = [starts("A"), starts("B")].map { |list| list.map { |e| e["at"] }.max }.min - 2
    a = mean_running("A", first_full, last)
    b = mean_running("B", first_full, last)
    expect(a + b + mean_running("C", first_full, last)).to be > 7.5 # every thread busy (but between jobs)
    expect([a, b]).to all(be_within(1).of(4))
  end

  it "brings a tenant back into the rotation when a SIGKILLed holder's lease expires" do
    2.times { |i| StaticCapJob.perform_async("K", i, 30_000) }
    StaticCapJob.perform_async("K", 2, 10)
    holder = start_server(concurrency: 2, queues: %w[fair])
    wait_for("2 holders") { redis.zcard(scope_keys("K")[:holders]) == 2 }
    spare = start_server(concurrency: 2, queues: %w[fair])
    wait_for("K capped") { capped_tenants == ["K"] }
    sleep 1 # both processes idle: nothing serves K
    expect(starts("K").size).to eq(2)

    holder.kill!
    killed = Process.clock_gettime(Process::CLOCK_REALTIME)
    third = wait_for("K's third job", timeout: 15) { starts("K").find { |e| e["index"] == 2 } }
    expect(third["pid"]).to eq(spare.pid)
    expect(third["at"] - killed).to be_between(0.5, 10) # when the 2 s leases have run out, not before
    wait_for("the killed holders reclaimed") { redis.zcard(scope_keys("K")[:holders]).zero? }
  end

  it "gives the slots back with the jobs on a TERM past Sidekiq's timeout: the tenant is back in the rotation" do
    4.times { |i| StaticCapJob.perform_async("S", i, 5000) }
    # Both threads busy: an idle thread woken during the hard shutdown could fetch a job and be killed with it
    # (it then stays in flight until recovered, its slot until its lease runs out).
    server = start_server(concurrency: 2, queues: %w[fair], args: %w[-t 1])
    wait_for("S capped with 2 running") { capped_tenants == ["S"] && starts("S").size == 2 }
    expect(redis.zcard(scope_keys("S")[:holders])).to eq(2)
    server.stop

    expect(redis.zcard(scope_keys("S")[:holders])).to eq(0)
    expect(redis.zcard(scope_keys("S")[:waiting])).to eq(0)
    expect(capped_tenants).to be_empty
    expect(redis.zrange("#{base}ready", 0, -1).map { |member| member[16..] }).to eq(["S"])
    expect(redis.lrange("#{base}t:S", 0, -1).map { |j| JSON.parse(j)["args"][1] }.first(2)).to match_array([0, 1])
    expect(redis.llen("#{base}t:S")).to eq(4)
  end

  it "halts a tenant at a runtime limit of 0 without polling, and runs it when the limit is raised" do
    Sidekiq::FairTenant.limits.set(0, tenant: "Z", queue: "fair")
    4.times { |i| StaticCapJob.perform_async("Z", i, 50) }
    4.times { |i| UncappedFairJob.perform_async("Y", i, 10) }
    start_server(concurrency: 4, queues: %w[fair])
    wait_for("Y's jobs") { finished("Y") == 4 }
    sleep 1
    expect(starts("Z")).to be_empty
    expect(capped_tenants).to eq(["Z"])

    # Idle with Z held back: the threads block as they do with nothing to do (no busy loop).
    before = redis.info("commandstats").dig("fcall", "calls").to_i
    sleep 3
    after = redis.info("commandstats").dig("fcall", "calls").to_i
    expect(after - before).to be <= 10

    Sidekiq::FairTenant.limits.set(3, tenant: "Z", queue: "fair")
    wait_for("Z's jobs") { finished("Z") == 4 }
    expect(max_running("Z")).to be_between(1, 3)
    expect(redis.llen(FairCapsApp::PARKED)).to eq(0)
  end

  it "keeps a custom key scope across tenants on a fair queue" do
    6.times do |i|
      CustomerCapJob.perform_async("T1", "c1", i, 100)
      CustomerCapJob.perform_async("T2", "c1", i, 100)
    end
    4.times { |i| CustomerCapJob.perform_async("T3", "c2", i, 100) }
    start_server(concurrency: 6, queues: %w[fair])
    wait_for("16 jobs") { finished == 16 }

    expect(max_running("c1")).to eq(1)
    expect(max_running("c2")).to eq(1)
    expect(starts.map { |e| e["jid"] }.uniq.size).to eq(16)
    c2_done = events.select { |e| e["event"] == "finish" && e["scope"] == "c2" }.map { |e| e["at"] }.max
    expect(c2_done).to be < starts("c1").map { |e| e["at"] }.max # c2 was not held behind c1
    expect(redis.llen(FairCapsApp::PARKED)).to eq(0)
  end

  it "leaves slots on a queue that is not fair as they were: parked and handed over" do
    6.times { |i| PlainCapJob.perform_async("P", i, 50) }
    start_server(concurrency: 4, queues: %w[plain])
    wait_for("6 jobs") { finished("P") == 6 }

    expect(max_running("P")).to eq(1)
    expect(starts("P").map { |e| e["jid"] }.uniq.size).to eq(6)
    expect(redis.llen(FairCapsApp::PARKED)).to be_positive # the recorder works: here jobs do park
    expect(redis.zcard(scope_keys("P", "plain")[:parked])).to eq(0)
  end
end
