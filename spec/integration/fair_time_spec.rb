# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"
require "sidekiq/fair_tenant/cli"

# Fair by worker time (`fair_queues = [{ "fair" => :time }]`) on a real `sidekiq` process: two backlogged
# tenants whose jobs take 100 ms and 10 ms share the worker time, where by job count they share jobs.
RSpec.describe "Fair queues by worker time" do
  let(:servers) { [] }
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  describe "configuration" do
    let(:config) { Sidekiq::FairTenant::Config.new({}) }

    it "takes a Hash entry or a :time suffix; by job count stays the default" do
      config.fair_queues = ["default", { "imports" => :time }, { exports: "jobs" }]
      expect(config.fair_queues).to eq(%w[default imports exports])
      expect(config.fair_time_queues).to eq(%w[imports])

      env = Sidekiq::FairTenant::Config.new("SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => "default,imports:time")
      expect([env.fair_queues, env.fair_time_queues]).to eq([%w[default imports], %w[imports]])
    end

    it "refuses any other mode, naming the rule" do
      expect { config.fair_queues = [{ "imports" => :bytes }] }
        .to raise_error(Sidekiq::FairTenant::ConfigurationError, /mode is "jobs" or "time", got "bytes"/)
      expect { config.fair_queues = "default,imports:fast" }
        .to raise_error(Sidekiq::FairTenant::ConfigurationError, /got "fast"/)
      expect { config.fair_queues = "queue:imports:time" }
        .to raise_error(Sidekiq::FairTenant::ConfigurationError, /without the queue: prefix/)
      expect { Sidekiq::FairTenant::Config.new("SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => "a:tme") }
        .to raise_error(Sidekiq::FairTenant::ConfigurationError, /SIDEKIQ_FAIR_TENANT_FAIR_QUEUES: .*got "tme"/)
    end
  end

  it "charges in process and learns from the acknowledgements, whatever the tenant's bytes" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [{ "fair" => :time }] }
    3.times { |i| FairJob.perform_async("café", i) }
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "time:1:a")
    first = fetch.retrieve_work
    expect(first.timing.first).to eq(names::TIME_DEFAULT_MS.to_s) # no history yet: the default
    first.acknowledge
    second = fetch.retrieve_work # carried the first's run time
    expect(redis.hkeys("#{base}#{names::RUNTIMES}")).to eq(["café"])
    expect(second.timing.first.to_f).to be < names::TIME_DEFAULT_MS # charged the mean it learnt
    second.acknowledge
    fetch.flush_acks
    expect(redis.hlen(fetch.inflight_key)).to eq(0)

    # Seen: the means it charges by, the queue's and the tenant's (fair_stats, the CLI's table).
    stats = Sidekiq::FairTenant.fair_stats.queue("fair")
    expect(stats[:mean_ms]).to be_a(Float).and be < names::TIME_DEFAULT_MS
    expect(stats[:page].map { |t| [t[:tenant], t[:mean_ms]] }).to eq([["café", stats[:mean_ms]]])
    text = Sidekiq::FairTenant::CLI::Format.fair(stats)
    expect(text).to include("\tby worker time: mean #{stats[:mean_ms]}ms").and include("\tmean #{stats[:mean_ms]}ms")
  end

  def start_server(mode)
    env = mode ? { "FAIR_APP_MODE" => mode } : {}
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 4, queues: %w[fair], env: env,
                       app: File.expand_path("../support/fair_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  # Both tenants backlogged throughout: far more jobs than run before the server stops.
  def push_backlogs
    Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(300) { |i| ["slow", i, 100] })
    Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(3000) { |i| ["fast", i, 10] })
  end

  # Worker time (s) and jobs per tenant, from the jobs' recorded start and finish.
  def spent
    events = redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.group_by { |e| e["event"] }
    starts = events.fetch("start", []).to_h { |e| [e["jid"], e["at"]] }
    events.fetch("finish", []).group_by { |e| e["tenant"] }.transform_values do |list|
      { time: list.sum { |e| e["at"] - starts.fetch(e["jid"]) }, jobs: list.size }
    end
  end

  def share(of, tenant, key) = of[tenant][key] / of.values.sum { |t| t[key] }.to_f

  def run_until_worker_seconds(mode, seconds)
    push_backlogs
    start_server(mode)
    wait_for("#{seconds} s of worker time") { (s = spent).size == 2 && s.values.sum { |t| t[:time] } >= seconds }
    servers.each(&:stop)
    of = spent
    warn format("  %<mode>s, 4 threads: slow %<st>.0f%% of the worker time, %<sj>d jobs; fast %<ft>.0f%%, %<fj>d jobs",
                mode: mode || "jobs", st: 100 * share(of, "slow", :time), sj: of["slow"][:jobs],
                ft: 100 * share(of, "fast", :time), fj: of["fast"][:jobs])
    expect(redis.hget("#{base}#{names::STATE}", names::STATE_N).to_i).to be > 0 # still backlogged
    of
  end

  it "shares worker time near evenly between a 100 ms and a 10 ms tenant under :time" do
    of = run_until_worker_seconds("time", 12)

    expect(share(of, "slow", :time)).to be_between(0.35, 0.65)
    expect(share(of, "fast", :time)).to be_between(0.35, 0.65)
    expect(of["fast"][:jobs]).to be > 4 * of["slow"][:jobs]
    means = redis.hgetall("#{base}#{names::RUNTIMES}")
    expect(means.keys).to contain_exactly("slow", "fast")
    # Learnt from the acknowledgements: each at least its sleep, the slow one well above the fast one (a loaded
    # machine stretches the 10 ms runs more than the 100 ms ones, so no tighter ratio holds).
    expect(means["slow"].to_f).to be >= 100
    expect(means["fast"].to_f).to be_between(10, means["slow"].to_f / 2)
  end

  it "shares job counts near evenly under :jobs (the slow tenant holds most of the worker time)" do
    of = run_until_worker_seconds(nil, 12)

    expect(share(of, "slow", :jobs)).to be_between(0.4, 0.6)
    expect(share(of, "slow", :time)).to be > 0.75
    expect(redis.exists?("#{base}#{names::RUNTIMES}")).to be(false)
    stats = Sidekiq::FairTenant.fair_stats.queue("fair")
    expect([stats[:mean_ms], *stats[:page].map { |t| t[:mean_ms] }]).to all(be_nil)
    expect(Sidekiq::FairTenant::CLI::Format.fair(stats)).not_to include("mean")
  end
end
