# frozen_string_literal: true

require "spec_helper"
require "erb"
require_relative "../support/sentinel_cluster"
require_relative "../support/test_certificates"

# The gem's Redis where Sidekiq's is: unix sockets with a password and db, ACL users whose password
# URLs must escape, password-protected sentinels and masters, sentinels over TLS — configured on the gem,
# or followed from Sidekiq's own settings field by field. Real redis-servers on loopback and sockets.
RSpec.describe "The gem's Redis settings" do
  odd = RedisServer::ODD_PASSWORD # space, @, :, /, %, +, # and ?
  servers = {}
  before(:all) do
    servers[:socket] = RedisServer.new(unixsocket: true, password: odd).start
    servers[:acl] = RedisServer.new(users: { "fair-tenant" => odd }, default_user: false).start
  end
  after(:all) { servers.each_value(&:stop) }

  after do
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = c.sentinels = c.sentinel_master = c.sentinel_username = c.sentinel_password = nil
      c.ssl = c.ssl_ca_file = nil
      c.sentinel_ssl = false
    end
  end

  def with_sidekiq_logger(logger)
    previous = sidekiq_config.logger
    sidekiq_config.logger = logger
    yield
  ensure
    sidekiq_config.logger = previous
  end

  # Percent-encoding for URLs: a space is %20, a + is %2B.
  def escape(part) = ERB::Util.url_encode(part)

  def tenant_key(tenant) = Sidekiq::FairTenant.native.router.key_for("NoTenantJob", "default", tenant)

  # One push re-routed (the rule sends every tenant's first job to "slow") with the tenant's key written
  # on `conn`, the server the gem should be using. The queue is counted where Sidekiq's client pushes.
  def routes_through(conn)
    size = -> { Sidekiq.redis { |c| c.call("LLEN", "queue:slow") } }
    before = size.call
    NoTenantJob.set(fair_tenant: "t").perform_async
    size.call == before + 1 && conn.exists?(tenant_key("t"))
  end

  describe "a unix socket with a password and a db" do
    let(:server) { servers[:socket] }

    before { server.redis.flushall }

    it "works from a unix:// URL (db, user and password in its query)" do
      Sidekiq::FairTenant.configure { |c| c.redis_url = server.url(3, unix_auth: :query) }

      expect(routes_through(server.redis(db: 3))).to be(true)
      expect(Sidekiq::FairTenant.native.server).to eq("unix://:***@#{server.socket_path}?db=3")
    end

    it "follows Sidekiq's path, db and password" do
      with_sidekiq_redis(path: server.socket_path, db: 2, password: odd) do
        expect(Sidekiq::FairTenant.native.server).to eq("unix://:***@#{server.socket_path}?db=2")
        expect(routes_through(server.redis(db: 2))).to be(true)
      end
    end
  end

  describe "an ACL user whose password has a space, @, :, / and more" do
    let(:server) { servers[:acl] }
    let(:fields) { { host: "127.0.0.1", port: server.port, db: 1, username: "fair-tenant", password: odd } }

    before { server.redis.flushall }

    it "works from a percent-encoded URL, and no message shows the password" do
      Sidekiq::FairTenant.configure { |c| c.redis_url = server.url(1, user: "fair-tenant") }

      expect(routes_through(server.redis(db: 1))).to be(true)
      expect(Sidekiq::FairTenant.native.server).to eq("redis://fair-tenant:***@127.0.0.1:#{server.port}/1")
    end

    it "follows Sidekiq's host, port, db, username and password fields" do
      with_sidekiq_redis(fields) do
        expect(routes_through(server.redis(db: 1))).to be(true)
      end
    end

    it "follows Sidekiq's URL (as Sidekiq's own client decodes it)" do
      with_sidekiq_redis(url: server.url(1, user: "fair-tenant")) do
        expect(Sidekiq.redis { |c| c.call("PING") }).to eq("PONG") # Sidekiq's client logs in with it too
        expect(routes_through(server.redis(db: 1))).to be(true)
      end
    end

    it "reads Sidekiq's settings from its configuration once, with no connection pool and no Sidekiq log line" do
      log = StringIO.new
      with_sidekiq_redis(fields) do
        with_sidekiq_logger(Logger.new(log)) do
          allow(ConnectionPool).to receive(:new).and_call_original
          settings = Sidekiq::FairTenant::Settings::SidekiqRedis.detect
          expect(settings).to include(port: server.port, db: 1, username: "fair-tenant", password: odd)
          expect(Sidekiq::FairTenant.ping).to be(true)
          expect(Sidekiq::FairTenant::Settings::SidekiqRedis.detect).to equal(settings)
          expect(ConnectionPool).not_to have_received(:new)
        end
      end
      expect(log.string).to eq("")
    end

    it "reads them once per process and again in a forked child or after config.redis=, as Sidekiq's " \
       "connection has them, opening no connection" do
      admin = server.redis
      connections = -> { admin.info("stats")["total_connections_received"].to_i }
      with_sidekiq_redis(fields) do
        opened = connections.call
        settings = Sidekiq::FairTenant::Settings::SidekiqRedis.detect
        expect(connections.call).to eq(opened)

        reader, writer = IO.pipe
        child = fork do
          again = Sidekiq::FairTenant::Settings::SidekiqRedis.detect
          writer.write(Marshal.dump([again == settings, again.equal?(settings)]))
          exit!(0)
        end
        writer.close
        expect(Marshal.load(reader.read)).to eq([true, false]) # rubocop:disable Security/MarshalLoad
        Process.wait(child)
        expect(Sidekiq::FairTenant::Settings::SidekiqRedis.detect).to equal(settings)

        # What a pool Sidekiq builds now connects with (7.x builds its own pool once, maybe before this example).
        read = Sidekiq::FairTenant::Settings::SidekiqRedis
        pool = SpecHelpers::SIDEKIQ7 ? Sidekiq.default_configuration.new_redis_pool(1, "spec") : Sidekiq.redis_pool
        own = pool.with { |c| SpecHelpers::SIDEKIQ7 ? read.from_redis_client(c.config) : read.from_redis_rb(c._client) }
        expect(settings).to eq(own)

        Sidekiq.configure_client { |c| c.redis = fields.merge(db: 3) }
        expect(Sidekiq::FairTenant::Settings::SidekiqRedis.detect).to include(db: 3, port: server.port)
      end
    end

    it "follows a password lambda of Sidekiq 7's redis-client (called with the username)", if: SpecHelpers::SIDEKIQ7 do
      users = []
      password = lambda do |user|
        users << user
        odd
      end
      with_sidekiq_redis(fields.merge(password: password)) do
        expect(routes_through(server.redis(db: 1))).to be(true)
        expect(users).to include("fair-tenant")
      end
    end

    it "fails open with one warning when the password is wrong, never showing either password; ping raises" do
      Sidekiq::FairTenant.configure do |c|
        c.redis_url = "redis://fair-tenant:#{escape("wrong #{odd}")}@127.0.0.1:#{server.port}/1"
      end

      log = capture_log { 3.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

      expect(queue_size("default")).to eq(3)
      expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
      expect(log).to include("fair-tenant:***@127.0.0.1:#{server.port}/1").and match(/authentication failed/i)
      expect(log).not_to include(odd)
      expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::Error, /authentication failed/i) { |e|
        expect(e.message).not_to include(odd)
      }
    end
  end

  describe "password-protected sentinels and master" do
    cluster = nil
    before(:all) { cluster = SentinelCluster.new(password: odd, sentinel_password: "sentinel #{odd}").start }
    after(:all) { cluster&.stop }

    let(:master) { cluster.server(cluster.current_master_port) }

    before { cluster.servers.each { |s| s.redis.flushall rescue nil } } # rubocop:disable Style/RescueModifier

    it "routes with the sentinels' password and the master's from redis_url" do
      Sidekiq::FairTenant.configure do |c|
        c.sentinels = cluster.sentinels.map { |s| "#{s[:host]}:#{s[:port]}" }
        c.sentinel_password = cluster.sentinel_password
        c.redis_url = "redis://:#{escape(odd)}@#{cluster.master_name}/4"
      end

      expect(routes_through(master.redis(db: 4))).to be(true)
      expect(Sidekiq::FairTenant.native.server).not_to include(odd)
    end

    it "follows Sidekiq's sentinels, their password, and the master's password and db" do
      with_sidekiq_redis(url: "redis://:#{escape(odd)}@#{cluster.master_name}/5", sentinels: cluster.sentinels) do
        Sidekiq.redis { |c| c.call("PING") } # connected, redis-rb's client names the master's address as its host
        expect(Sidekiq::FairTenant.native.server).to include("sentinel master #{cluster.master_name}")
        expect(routes_through(master.redis(db: 5))).to be(true)
      end
    end

    it "fails open with one warning when the sentinels' password is wrong; ping raises" do
      Sidekiq::FairTenant.configure do |c|
        c.sentinels = cluster.sentinels.map { |s| "#{s[:host]}:#{s[:port]}" }
        c.sentinel_master = cluster.master_name
        c.sentinel_password = "wrong"
      end

      log = capture_log { 2.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

      expect(queue_size("default")).to eq(2)
      expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
      expect(log).to match(/WRONGPASS|invalid|auth/i)
      expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /sentinel/)
    end
  end

  describe "sentinels and master over TLS" do
    certs = TestCertificates.shared
    cluster = nil
    before(:all) { cluster = SentinelCluster.new(sentinels: 1, quorum: 1, tls: certs).start }
    after(:all) { cluster&.stop }

    let(:master) { cluster.server(cluster.current_master_port) }

    before { cluster.servers.each { |s| s.redis.flushall rescue nil } } # rubocop:disable Style/RescueModifier

    it "routes with sentinel_ssl, the master's TLS and the CA file" do
      Sidekiq::FairTenant.configure do |c|
        c.sentinels = cluster.sentinels.map { |s| "#{s[:host]}:#{s[:port]}" }
        c.sentinel_master = cluster.master_name
        c.sentinel_ssl = true
        c.ssl = true
        c.ssl_ca_file = certs.ca_file
      end

      expect(routes_through(master.redis)).to be(true)
      expect(Sidekiq::FairTenant.native.server).to include(":#{master.port}")
    end

    it "fails open when the sentinels speak TLS and the gem does not" do
      Sidekiq::FairTenant.configure do |c|
        c.sentinels = cluster.sentinels.map { |s| "#{s[:host]}:#{s[:port]}" }
        c.sentinel_master = cluster.master_name
        c.connect_timeout = c.read_timeout = 0.3
      end

      log = capture_log { NoTenantJob.set(fair_tenant: "t").perform_async }

      expect(queue_size("default")).to eq(1)
      expect(log).to include("no sentinel gave the address of master #{cluster.master_name}")
    ensure
      Sidekiq::FairTenant.configure { |c| c.connect_timeout = c.read_timeout = 0.5 }
    end

    it "follows Sidekiq's TLS sentinels (ssl and ssl_params)" do
      options = { url: "redis://#{cluster.master_name}/0", sentinels: cluster.sentinels, ssl: true,
                  ssl_params: certs.ssl_params }
      with_sidekiq_redis(options) do
        Sidekiq.redis { |c| c.call("PING") }
        expect(Sidekiq::FairTenant.config.connection_settings)
          .to include(sentinel_ssl: true, ssl: true, sentinel_master: cluster.master_name)
        expect(routes_through(master.redis)).to be(true)
      end
    end
  end
end
