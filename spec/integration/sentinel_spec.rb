# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/sentinel_cluster"

# The gem's own Redis behind Sentinel: one master, one replica, three sentinels (one cluster for the
# file), Sidekiq's queues on the plain spec server as usual. Slots live in Sidekiq's Redis: their
# examples put Sidekiq's behind the same sentinels.
RSpec.describe "Sentinel for the gem's Redis" do
  shared_cluster = nil
  before(:all) { shared_cluster = SentinelCluster.new.start }
  after(:all) { shared_cluster&.stop }

  let(:cluster) { shared_cluster }

  let(:addresses) { cluster.sentinels.map { |s| "#{s[:host]}:#{s[:port]}" } }

  before { cluster.servers.each { |server| server.redis.flushdb rescue nil } } # rubocop:disable Style/RescueModifier

  after do
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = c.sentinels = c.sentinel_master = c.sentinel_username = c.sentinel_password = nil
      c.connect_timeout = c.read_timeout = c.write_timeout = 0.5
      c.reconnect_backoff = 1
    end
  end

  def use_sentinels(**settings)
    Sidekiq::FairTenant.configure do |c|
      c.sentinels = addresses
      c.sentinel_master = cluster.master_name
      settings.each { |key, value| c.public_send(:"#{key}=", value) }
    end
  end

  def master = cluster.server(cluster.current_master_port)
  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  def tenant_key(tenant) = Sidekiq::FairTenant.native.router.key_for("NoTenantJob", "default", tenant)

  # Pushes until one is re-routed by the server on `port`; returns how long that took and how many pushes.
  # (The old master keeps accepting writes until the sentinels demote it, which closes its connections.)
  # Routing resumes at all (the sentinels demote the old master ~4 s after a failover here; how soon is printed,
  # not asserted: a loaded machine takes longer).
  def until_routed(port, deadline: 30)
    started = monotonic
    pushes = 0
    loop do
      before = queue_size("slow")
      NoTenantJob.set(fair_tenant: "after").perform_async
      pushes += 1
      routed = queue_size("slow") > before && cluster.server(port).redis.exists?(tenant_key("after"))
      return [monotonic - started, pushes] if routed
      raise "routing did not resume within #{deadline} s" if monotonic - started > deadline

      sleep 0.02
    end
  end

  it "routes through the sentinels to the master they name" do
    use_sentinels

    NoTenantJob.set(fair_tenant: "t").perform_async

    expect(queue_size("slow")).to eq(1)
    expect(Sidekiq::FairTenant.ping).to be(true)
    expect(master.redis.exists?(tenant_key("t"))).to be(true)
    expect(Sidekiq::FairTenant.native.server)
      .to include("sentinel master #{cluster.master_name}", ":#{cluster.current_master_port}", *addresses)
  end

  it "takes the master name, credentials and db from redis_url, and accepts {host:, port:} hashes" do
    Sidekiq::FairTenant.configure do |c|
      c.sentinels = cluster.sentinels
      c.redis_url = "redis://#{cluster.master_name}/3"
    end

    NoTenantJob.set(fair_tenant: "t").perform_async

    expect(queue_size("slow")).to eq(1)
    expect(master.redis(db: 3).exists?(tenant_key("t"))).to be(true)
  end

  it "keeps every job through a failover under 4 pushing threads, and routes on the new master" do
    use_sentinels
    pushed = 0
    lock = Mutex.new
    stop = false
    errors = []
    pushers = Array.new(4) do |i|
      Thread.new do
        until stop
          begin
            NoTenantJob.set(fair_tenant: "t#{i}").perform_async
            lock.synchronize { pushed += 1 }
          rescue StandardError => e
            lock.synchronize { errors << e }
          end
          sleep 0.005
        end
      end
    end
    sleep 0.3
    new_port = cluster.failover!
    resumed, probes = until_routed(new_port)
    stop = true
    pushers.each(&:join)

    expect(errors).to eq([])
    expect(pushed).to be > 50
    expect(queue_size("default") + queue_size("slow")).to eq(pushed + probes)
    expect(Sidekiq::FairTenant.native.server).to include(":#{new_port}")
    expect(cluster.server(new_port).redis.exists?(tenant_key("after"))).to be(true)
    warn format("  failover %<failover>.2f s, routing resumed %<resumed>.2f s after it",
                failover: cluster.last_failover_seconds, resumed: resumed)
  end

  it "fails open with one warning naming the sentinels when they know no such master; ping raises" do
    use_sentinels(sentinel_master: "no-such-master")

    log = capture_log { 3.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

    expect(queue_size("default")).to eq(3)
    expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
    expect(log).to include("no master named no-such-master", *addresses)
    expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /no-such-master/)
  end

  it "fails open with one warning naming the sentinels and the cause when none answers; ping raises" do
    dead = Array.new(2) { "127.0.0.1:#{RedisServer.free_port}" }
    use_sentinels(connect_timeout: 0.2, reconnect_backoff: 0.3)
    Sidekiq::FairTenant.configure { |c| c.sentinels = dead }

    log = capture_log { 3.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

    expect(queue_size("default")).to eq(3)
    expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
    expect(log).to include(*dead).and match(/refused/i)
    sleep 0.3
    expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /#{dead.first}/)
  end

  it "rejects bad sentinel settings, naming the key and the rule" do
    expect { Sidekiq::FairTenant.configure { |c| c.sentinels = ["nohost"] } }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /sentinels must be "host:port" strings/)
    expect { Sidekiq::FairTenant.configure { |c| c.sentinels = [{ host: "h", port: 70_000 }] } }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /port 1-65535/)
    expect { Sidekiq::FairTenant::Config.new("SIDEKIQ_FAIR_TENANT_SENTINELS" => "a:1,b") }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /SIDEKIQ_FAIR_TENANT_SENTINELS: sentinels must/)
    config = Sidekiq::FairTenant::Config.new("SIDEKIQ_FAIR_TENANT_SENTINELS" => "a:1, [::1]:2")
    expect(config.sentinels).to eq([["a", 1], ["::1", 2]])
    expect { config.connection_settings }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /sentinel_master is required/)
  end

  describe "with no redis_url or sentinels of its own" do
    it "follows Sidekiq's sentinels and master name" do
      options = { url: "redis://#{cluster.master_name}/2",
                  sentinels: cluster.sentinels.map { |s| s.slice(:host, :port) } }
      with_sidekiq_redis(options) do
        expect(Sidekiq::FairTenant.ping).to be(true)
        expect(Sidekiq::FairTenant.native.server).to include(*addresses)
        Sidekiq::FairTenant.native.noop_eval("probe")
        expect(Sidekiq.redis { |conn| conn.call("PING") }).to eq("PONG") # Sidekiq's own client agrees
      end
    end
  end

  describe "slots, stats and the CLI through Sentinel" do
    before { use_sentinels }

    # Slots and limits live in Sidekiq's Redis (the gem's own serves routing only): Sidekiq's behind Sentinel.
    let(:sidekiq_sentinel) do
      { url: "redis://#{cluster.master_name}/0", sentinels: cluster.sentinels.map { |s| s.slice(:host, :port) } }
    end

    it "acquires and releases a concurrency slot in Sidekiq's Redis behind Sentinel" do
      job = { "class" => "SlotJob", "queue" => "default", "args" => ["acme", 0, 0], "jid" => "sentinel-1",
              "enqueued_at" => Time.now.to_f, "fair_tenant" => "acme",
              "fair_tenant_concurrency" => { "limit" => 1, "lease" => 60 } }
      scope = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default")
      held = nil
      with_sidekiq_redis(sidekiq_sentinel) do
        Sidekiq::FairTenant::ServerMiddleware.new.call(Object.new, job, "default") do
          held = Sidekiq::FairTenant.stats.scope(*scope)[:holders].map { |h| h[:jid] }
        end
        expect(Sidekiq::FairTenant.stats.scope(*scope)[:holders]).to be_empty
      end

      expect(held).to eq(["sentinel-1"])
    end

    it "reports a tenant's counts" do
      6.times { ThrottledJob.perform_async(1) }

      row = Sidekiq::FairTenant.stats.tenant(ThrottledJob, "tenant-1")
      expect(row[:windows].map { |w| w[:count] }).to eq([6, 6])
    end

    it "sets a runtime limit from the command line: Sidekiq's sentinels from the app, the gem's from the environment" do
      exe = File.expand_path("../../exe/sidekiq-fair_tenant", __dir__)
      env = { "REDIS_URL" => nil, "RUBYOPT" => "-I#{File.expand_path("../../lib", __dir__)}",
              "SIDEKIQ_FAIR_TENANT_SENTINELS" => addresses.join(","),
              "SIDEKIQ_FAIR_TENANT_SENTINEL_MASTER" => cluster.master_name }
      out, err, status = Dir.mktmpdir do |dir|
        app = File.join(dir, "sentinel_app.rb")
        File.write(app, "Sidekiq.configure_client { |c| c.redis = #{sidekiq_sentinel.inspect} }\n")
        Open3.capture3(env, Gem.ruby, exe, "-r", app, "limits", "set", "--tenant", "acme", "4")
      end

      expect([status.exitstatus, out, err]).to eq([0, "limit set; 0 parked job(s) released\n", ""])
      expect(with_sidekiq_redis(sidekiq_sentinel) { Sidekiq::FairTenant.limits.get(tenant: "acme") }).to eq(4)
      expect(Sidekiq::FairTenant.limits.get(tenant: "acme")).to be_nil # not in the spec's plain server
    end
  end
end
