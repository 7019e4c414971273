# frozen_string_literal: true

require "spec_helper"
require "open3"
require "openssl"
require_relative "../support/test_certificates"

# The gem's own Redis over TLS: real `redis-server --tls-port` processes with a throwaway CA (openssl),
# Sidekiq's queues (and the concurrency slots) on the plain spec server as usual.
RSpec.describe "TLS to the gem's Redis" do
  let(:certs) { TestCertificates.shared }
  let(:rules) { Sidekiq::FairTenant::Native::RuleSet.new("NoTenantJob", [{ queue: "slow", threshold: 0 }], 86_400) }

  servers = {}
  before(:all) do
    certs = TestCertificates.shared
    # Also on 127.0.0.2, a loopback address its certificate does not name.
    servers[:tls] = RedisServer.new(tls: certs, args: ["--bind", "127.0.0.1", "127.0.0.2"]).start
    servers[:mutual] = RedisServer.new(tls: certs, tls_auth_clients: true).start
    servers[:tls12] = RedisServer.new(tls: certs, args: ["--tls-protocols", "TLSv1.2"]).start
    servers[:tls13] = RedisServer.new(tls: certs, args: ["--tls-protocols", "TLSv1.3"]).start
  end
  after(:all) { servers.each_value(&:stop) }
  before { servers.each_value { |server| server.redis.flushdb } }

  after do
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = nil
      c.ssl = nil
      c.ssl_ca_file = c.ssl_cert_file = c.ssl_key_file = nil
      c.ssl_verify_mode = "peer"
      c.ssl_verify_hostname = true
      c.reconnect_backoff = 1
    end
  end

  def use(server, **settings)
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = server.url
      settings.each { |key, value| c.public_send(:"#{key}=", value) }
    end
  end

  def routed?
    NoTenantJob.set(fair_tenant: "t").perform_async
    queue_size("slow").positive?
  end

  it "routes with the server's certificate checked against a CA file" do
    use(servers[:tls], ssl_ca_file: certs.ca_file)

    expect(routed?).to be(true)
    expect(Sidekiq::FairTenant.ping).to be(true)
    expect(servers[:tls].redis.exists?(Sidekiq::FairTenant.native.router.key_for("NoTenantJob", "default", "t")))
      .to be(true)
  end

  it "speaks TLS 1.2 and TLS 1.3" do
    %i[tls12 tls13].each do |name|
      use(servers[name], ssl_ca_file: certs.ca_file)
      expect(Sidekiq::FairTenant.ping).to be(true)
    end
  end

  it "routes with verify none (a self-signed certificate and no CA file)" do
    use(servers[:tls], ssl_verify_mode: "none")

    expect(routed?).to be(true)
  end

  it "routes with the chain checked but not the host name" do
    url = servers[:tls].url.sub("127.0.0.1", "127.0.0.2") # the certificate names 127.0.0.1 and localhost
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = url
      c.ssl_ca_file = certs.ca_file
      c.ssl_verify_hostname = false
    end

    expect(Sidekiq::FairTenant.ping).to be(true)
  end

  it "refuses a certificate for another host name while the host name is checked" do
    Sidekiq::FairTenant.configure do |c|
      c.redis_url = servers[:tls].url.sub("127.0.0.1", "127.0.0.2")
      c.ssl_ca_file = certs.ca_file
    end

    expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /certificate/i)
  end

  it "routes with a client certificate to a server that asks for one (mutual TLS)" do
    use(servers[:mutual], ssl_ca_file: certs.ca_file, ssl_cert_file: certs.client_cert,
                          ssl_key_file: certs.client_key)

    expect(routed?).to be(true)
  end

  it "fails open, warning once, without the client certificate a mutual-TLS server asks for" do
    use(servers[:mutual], ssl_ca_file: certs.ca_file)

    log = capture_log { 3.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

    expect(queue_size("default")).to eq(3)
    expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
    expect(log).to include(":#{servers[:mutual].port}")
  end

  it "fails open with a warning naming the server and the cause when the CA is the wrong one" do
    use(servers[:tls], ssl_ca_file: certs.wrong_ca_file)

    log = capture_log { 3.times { NoTenantJob.set(fair_tenant: "t").perform_async } }

    expect(queue_size("default")).to eq(3)
    expect(log.scan("[sidekiq-fair_tenant]").size).to eq(1)
    expect(log).to match(%r{ConnectionError: .*certificate.*rediss://127\.0\.0\.1:#{servers[:tls].port}}i)
    expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /certificate/i)
  end

  it "turns TLS on for a redis:// URL with ssl: true (Sidekiq 7's setting)" do
    use(servers[:tls], ssl: true, ssl_ca_file: certs.ca_file)
    Sidekiq::FairTenant.configure { |c| c.redis_url = servers[:tls].url.sub("rediss://", "redis://") }

    expect(routed?).to be(true)
  end

  it "fails open and warns when a TLS file cannot be read; explicit calls raise ConfigurationError" do
    use(servers[:tls], ssl_ca_file: "/nonexistent/ca.crt")

    log = capture_log { NoTenantJob.set(fair_tenant: "t").perform_async }

    expect(queue_size("default")).to eq(1)
    expect(log).to include("ssl_ca_file /nonexistent/ca.crt cannot be read")
    expect do
      Sidekiq::FairTenant.ping
    end.to raise_error(Sidekiq::FairTenant::ConfigurationError, %r{/nonexistent/ca\.crt})
  end

  describe "slots, stats and the CLI over TLS" do
    before { use(servers[:tls], ssl_ca_file: certs.ca_file) }

    # Slots live in Sidekiq's Redis: the gem's TLS settings are its own server's, Sidekiq's apply there.
    let(:sidekiq_tls) { { url: servers[:tls].url, ssl_params: { ca_file: certs.ca_file } } }

    def holds_a_slot(jid)
      job = { "class" => "SlotJob", "queue" => "default", "args" => ["acme", 0, 0], "jid" => jid,
              "enqueued_at" => Time.now.to_f, "fair_tenant" => "acme",
              "fair_tenant_concurrency" => { "limit" => 1, "lease" => 60 } }
      scope = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default")
      held = nil
      Sidekiq::FairTenant::ServerMiddleware.new.call(Object.new, job, "default") do
        held = Sidekiq::FairTenant.stats.scope(*scope)[:holders].map { |h| h[:jid] }
      end
      [held, Sidekiq::FairTenant.stats.scope(*scope)[:holders]]
    end

    it "acquires and releases a concurrency slot in Sidekiq's plain Redis, without the gem's TLS settings" do
      expect(holds_a_slot("plain-1")).to eq([["plain-1"], []])
    end

    it "acquires and releases a concurrency slot in Sidekiq's Redis over TLS, with Sidekiq's TLS settings" do
      with_sidekiq_redis(sidekiq_tls) do
        expect(holds_a_slot("tls-1")).to eq([["tls-1"], []])
      end
    end

    it "reports a tenant's counts" do
      6.times { ThrottledJob.perform_async(1) }

      row = Sidekiq::FairTenant.stats.tenant(ThrottledJob, "tenant-1")
      expect(row[:windows].map { |w| w[:count] }).to eq([6, 6])
      key = Sidekiq::FairTenant.native.router.key_for("ThrottledJob", "default", "tenant-1")
      expect(servers[:tls].redis.exists?(key)).to be(true)
    end

    it "sets a runtime limit from the command line, the CA file from the environment" do
      exe = File.expand_path("../../exe/sidekiq-fair_tenant", __dir__)
      env = { "REDIS_URL" => nil, "RUBYOPT" => "-I#{File.expand_path("../../lib", __dir__)}",
              "SIDEKIQ_FAIR_TENANT_SSL_CA_FILE" => certs.ca_file }
      out, err, status = Open3.capture3(env, Gem.ruby, exe, "--redis-url", servers[:tls].url,
                                        "limits", "set", "--tenant", "acme", "4")

      expect([status.exitstatus, out, err]).to eq([0, "limit set; 0 parked job(s) released\n", ""])
      expect(with_sidekiq_redis(sidekiq_tls) { Sidekiq::FairTenant.limits.get(tenant: "acme") }).to eq(4)
    end
  end

  describe "with no redis_url of its own" do
    it "follows Sidekiq's TLS settings: CA file, client certificate and key objects (mutual TLS)" do
      params = { ca_file: certs.ca_file, cert: OpenSSL::X509::Certificate.new(File.read(certs.client_cert)),
                 key: OpenSSL::PKey.read(File.read(certs.client_key)) }
      with_sidekiq_redis(url: servers[:mutual].url, ssl_params: params) do
        expect(Sidekiq::FairTenant.native.server).to eq(servers[:mutual].url)
        expect(Sidekiq::FairTenant.ping).to be(true)
        expect(Sidekiq.redis { |conn| conn.call("PING") }).to eq("PONG") # Sidekiq's own client agrees
      end
    end

    it "follows Sidekiq's verify_mode VERIFY_NONE (Heroku's documented setting)" do
      with_sidekiq_redis(url: servers[:tls].url, ssl_params: { verify_mode: OpenSSL::SSL::VERIFY_NONE }) do
        expect(Sidekiq::FairTenant.ping).to be(true)
      end
    end

    it "keeps its own TLS setting over Sidekiq's" do
      Sidekiq::FairTenant.configure { |c| c.ssl_ca_file = certs.wrong_ca_file }
      with_sidekiq_redis(url: servers[:tls].url, ssl_params: { ca_file: certs.ca_file }) do
        expect { Sidekiq::FairTenant.ping }.to raise_error(Sidekiq::FairTenant::ConnectionError, /certificate/i)
      end
    end
  end

  it "rejects a verify mode it does not know, naming the rule" do
    expect { Sidekiq::FairTenant.configure { |c| c.ssl_verify_mode = "maybe" } }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /ssl_verify_mode must be one of peer, none/)
  end
end
