# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# Real `sidekiq` processes running RoomyJob (limit 10, lease 600 s): a slot taken with room goes back with its
# thread's next acquire (one script call per job), alone when the thread has no next job within
# RELEASE_DEFER_MS, and at once when the process quiets or stops. The lease is far longer than the specs: a slot
# still held after its job ended was never given back.
RSpec.describe "Concurrency slots given back with the next acquire" do
  let(:servers) { [] }

  after { servers.each(&:stop) }

  def start_server(concurrency: 1, args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, args: args)
                  .start.tap { |s| servers << s }
  end

  def events = redis.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def finished = events.count { |e| e["event"] == "finish" }
  def scope = Sidekiq::FairTenant::Native::Slots.tenant_scope("R", "default")
  def holders = Sidekiq::FairTenant.native.stats.inspect_scope(*scope)[0].map(&:first)

  def scripts_run
    redis.info("commandstats").sum { |name, stats| name.start_with?("eval") ? stats["calls"].to_i : 0 }
  end

  it "sends one script call per job in a thread running one job after another, and gives every slot back" do
    jobs = 60
    jobs.times { |i| RoomyJob.perform_async("R", i, 0) }
    redis.call("CONFIG", "RESETSTAT")
    start_server(concurrency: 1)
    wait_for("#{jobs} jobs") { finished == jobs }
    wait_for("the last slot back") { holders.empty? }

    # An acquire per job carrying the previous job's release, the last release alone, and the heartbeat's few
    # calls (two per job before).
    expect(scripts_run).to be < jobs * 1.2
    expect(events.select { |e| e["event"] == "start" }.map { |e| e["index"] }.sort).to eq((0...jobs).to_a)
  end

  it "gives a slot back alone within a few ms when its thread gets no next job" do
    start_server(concurrency: 2)
    RoomyJob.perform_async("R", 0, 0)
    wait_for("the job") { finished == 1 }
    ended = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    wait_for("its slot back", timeout: 5, every: 0.005) { holders.empty? }

    expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - ended).to be < 1.0 # the lease is 600 s
    expect(servers.first.alive?).to be(true)
  end

  it "gives slots back at once when the process quiets, and when it stops" do
    server = start_server(concurrency: 2, args: %w[-t 10])
    RoomyJob.perform_async("R", 0, 0)
    wait_for("the first job") { finished == 1 }
    RoomyJob.perform_async("R", 1, 1_500)
    wait_for("the second job running") { events.any? { |e| e["event"] == "start" && e["index"] == 1 } }

    Process.kill("TSTP", server.pid) # quiet: no next job will come
    wait_for("the first slot back") { holders.size == 1 }
    # One TERM (a second, sent while Sidekiq stops, interrupts its wait for the running job: it exits without it).
    expect(server.stop).to be(true)
    expect(finished).to eq(2)
    expect(holders).to be_empty # the job that ended while the process stopped gave its slot back
  end
end

# The server middleware driven by 25 threads in this process, each running one job after another (the release of
# each riding with its next acquire): the cap holds at every moment, every job runs exactly once (parked ones
# when handed a slot and fetched again), and every slot is back once the threads are idle.
RSpec.describe "Concurrency slots given back with the next acquire, 25 threads" do
  let(:middleware) { Sidekiq::FairTenant::ServerMiddleware.new }
  let(:scope) { Sidekiq::FairTenant::Native::Slots.tenant_scope("T25", "default") }

  def payload(index, limit)
    { "class" => "RoomyJob", "queue" => "default", "args" => ["T25", index, 0], "jid" => format("j%04d", index),
      "enqueued_at" => Time.now.to_f, "fair_tenant" => "T25",
      "fair_tenant_concurrency" => { "limit" => limit, "lease" => 600 } }
  end

  def holders = Sidekiq::FairTenant.native.stats.inspect_scope(*scope)[0]

  # Limit 10: the scope is often full (slots go back at once, jobs park); 1000: it always has room.
  [10, 1000].each do |limit|
    it "never runs more than #{limit}, runs each job once, and gives every slot back" do
      ran, most = run_all(limit)

      expect(most).to be <= limit
      expect(ran.size).to eq(400)
      expect(ran.values.uniq).to eq([1])
      wait_for("every slot back", timeout: 1, every: 0.005) { holders.empty? }
      expect(Sidekiq::FairTenant.native.stats.inspect_scope(*scope)[1]).to eq(0) # nothing parked
    end
  end

  # 400 jobs through the middleware on 25 threads: [runs per jid, most running at once].
  def run_all(limit)
    jobs = Queue.new
    400.times { |i| jobs << payload(i, limit) }
    ran = Hash.new(0)
    running = most = 0
    lock = Mutex.new
    Array.new(25) do
      Thread.new do
        while lock.synchronize { ran.size < 400 }
          job = next_job(jobs) or next sleep(0.002)
          middleware.call(RoomyJob.new, job, "default") do
            lock.synchronize { most = [most, running += 1].max }
            sleep(rand * 0.002)
            lock.synchronize { running -= 1 and ran[job["jid"]] += 1 }
          end
        end
      end
    end.each(&:join)
    [ran, most]
  end

  # The jobs pushed first, then copies handed a slot (pushed back to queue:default by a release).
  def next_job(jobs)
    jobs.pop(true)
  rescue ThreadError
    raw = redis.rpop("queue:default")
    raw && JSON.parse(raw)
  end
end
