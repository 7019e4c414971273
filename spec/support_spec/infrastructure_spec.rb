# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/test_certificates"
require_relative "../support/sentinel_cluster"

# The servers the TLS / Sentinel / unix-socket / ACL specs run against, checked with redis-rb alone.
RSpec.describe "Spec infrastructure" do
  let(:certs) { TestCertificates.shared }

  # TLS rejections surface as an SSL error during the handshake or, with TLS 1.3 (where the client
  # finishes its side before the server checks its certificate), as a closed connection on first use.
  def expect_rejected(&block)
    expect(&block).to raise_error do |error|
      expect(error).to be_a(Redis::BaseConnectionError).or be_a(OpenSSL::SSL::SSLError)
    end
  end

  def tcp_refused?(port)
    TCPSocket.new("127.0.0.1", port).close
    false
  rescue Errno::ECONNREFUSED
    true
  end

  describe TestCertificates do
    it "makes v3 leaves for 127.0.0.1/localhost and a client, PKCS#8 keys, and an unrelated CA" do
      server = OpenSSL::X509::Certificate.new(File.read(certs.server_cert))
      ca = OpenSSL::X509::Certificate.new(File.read(certs.ca_file))
      extensions = server.extensions.to_h { |e| [e.oid, e.value] }
      expect(server.version).to eq(2)
      expect(server.verify(ca.public_key)).to be(true)
      expect(extensions).to include("basicConstraints" => "CA:FALSE",
                                    "extendedKeyUsage" => "TLS Web Server Authentication",
                                    "subjectAltName" => "IP Address:127.0.0.1, DNS:localhost")
      client = OpenSSL::X509::Certificate.new(File.read(certs.client_cert))
      expect(client.extensions.to_h { |e| [e.oid, e.value] }["extendedKeyUsage"]).to eq("TLS Web Client Authentication")
      [certs.server_key, certs.client_key].each do |key|
        expect(File.read(key)).to start_with("-----BEGIN PRIVATE KEY-----")
      end
      wrong_ca = OpenSSL::X509::Certificate.new(File.read(certs.wrong_ca_file))
      expect(server.verify(wrong_ca.public_key)).to be(false)
    end
  end

  describe "a TLS server" do
    tls_server = nil
    before(:all) { tls_server = RedisServer.new(tls: TestCertificates.shared).start }
    after(:all) { tls_server&.stop }

    it "answers PING over TLS, verified against the test CA, at its rediss:// URL" do
      expect(tls_server.url).to eq("rediss://127.0.0.1:#{tls_server.port}/0")
      expect(tls_server.redis.ping).to eq("PONG")
      expect(Redis.new(url: tls_server.url, ssl_params: certs.ssl_params).ping).to eq("PONG")
    end

    it "is refused by a client that trusts another CA" do
      client = tls_server.redis(ssl_params: certs.ssl_params(ca_file: certs.wrong_ca_file), reconnect_attempts: 0)
      expect { client.ping }.to raise_error(/certificate verify failed/) { |error|
        expect(error).to be_a(OpenSSL::SSL::SSLError).or be_a(Redis::CannotConnectError)
      }
    end

    it "does not speak plain Redis" do
      expect_rejected { tls_server.redis(ssl: false, timeout: 1, reconnect_attempts: 0).ping }
    end
  end

  describe "a mutual-TLS server" do
    mtls_server = nil
    before(:all) { mtls_server = RedisServer.new(tls: TestCertificates.shared, tls_auth_clients: true).start }
    after(:all) { mtls_server&.stop }

    it "accepts a client with a certificate from its CA" do
      expect(mtls_server.redis(ssl_params: certs.ssl_params(client: true)).ping).to eq("PONG")
    end

    it "rejects a client without a certificate, or with one from another CA" do
      expect_rejected { mtls_server.redis(ssl_params: certs.ssl_params, reconnect_attempts: 0).ping }
      expect_rejected { mtls_server.redis(ssl_params: certs.ssl_params(client: :wrong), reconnect_attempts: 0).ping }
    end
  end

  describe "a server with an ACL user whose password needs escaping" do
    acl_server = nil
    before(:all) do
      acl_server = RedisServer.new(users: { "fair_tenant" => RedisServer::ODD_PASSWORD }, default_user: false).start
    end
    after(:all) { acl_server&.stop }

    it "authenticates the user, also through its percent-encoded URL" do
      expect(RedisServer::ODD_PASSWORD).to include(" ", "@", ":", "/")
      expect(acl_server.redis(user: "fair_tenant").call("ACL", "WHOAMI")).to eq("fair_tenant")
      expect(acl_server.url(user: "fair_tenant")).to include("%20").and include("%40").and include("%2F")
      expect(Redis.new(url: acl_server.url(user: "fair_tenant")).call("ACL", "WHOAMI")).to eq("fair_tenant")
    end

    it "refuses a wrong password and the (disabled) default user" do
      expect { acl_server.redis(user: "fair_tenant", password: "p@ss w:rd/").ping }
        .to raise_error(Redis::BaseError, /WRONGPASS/)
      expect { acl_server.redis(username: nil, password: nil).ping }.to raise_error(Redis::CommandError, /NOAUTH/)
    end
  end

  it "starts a server with requirepass, its URL carrying the password" do
    server = RedisServer.new(password: RedisServer::ODD_PASSWORD).start
    expect(Redis.new(url: server.url).ping).to eq("PONG")
    expect { Redis.new(url: server.url(credentials: false)).ping }.to raise_error(Redis::CommandError, /NOAUTH/)
  ensure
    server&.stop
  end

  it "starts a server on a unix socket only (perm 700), with a password" do
    server = RedisServer.new(unixsocket: true, password: RedisServer::ODD_PASSWORD).start
    expect(server.port).to be_nil
    expect(File.stat(server.socket_path)).to be_socket
    expect(File.stat(server.socket_path).mode & 0o777).to eq(0o700)
    expect(server.url).to start_with("unix://:p%40ss%20w").and end_with("@#{server.socket_path}?db=0")
    expect(server.url(unix_auth: :query)).to eq("unix://#{server.socket_path}?db=0&pass=p%40ss%20w%3Ard%2F%25%2B%23%3F")
    expect(server.redis.ping).to eq("PONG")
    expect { server.redis(password: nil).ping }.to raise_error(Redis::CommandError, /NOAUTH/)
  ensure
    server&.stop
  end

  it "starts a replica that follows its master and refuses writes" do
    master = RedisServer.new(password: "s3cret").start
    replica = RedisServer.new(password: "s3cret", replica_of: master).start
    expect(replica.redis.info("replication")).to include("role" => "slave", "master_link_status" => "up")
    master.redis.set("k", "v")
    replica.wait_until("the write to replicate", timeout: 5) { replica.redis.get("k") == "v" }
    expect { replica.redis.set("k", "w") }.to raise_error(Redis::BaseError, /READONLY/)
  ensure
    replica&.stop
    master&.stop
  end

  it "stops a server by pid, and its watchdog stops it when the process that started it dies" do
    server = RedisServer.new.start
    server.stop
    expect(tcp_refused?(server.port)).to be(true)

    script = "require #{File.expand_path("../support/redis_server", __dir__).inspect}; " \
             "s = RedisServer.new.start; puts s.port, s.dir; $stdout.flush; sleep"
    stdin, stdout, wait = Open3.popen2(Gem.ruby, "-e", script)
    port = Integer(stdout.gets)
    dir = stdout.gets.chomp
    expect(tcp_refused?(port)).to be(false)
    Process.kill("KILL", wait.pid) # no at_exit hooks
    wait.value
    server.wait_until("the orphaned server on #{port} to stop", timeout: 5) { tcp_refused?(port) }
  ensure
    [stdin, stdout].each { |io| io&.close }
    FileUtils.rm_rf(dir) if dir
  end

  describe SentinelCluster do
    cluster = nil
    before(:all) { cluster = SentinelCluster.new.start }
    after(:all) { cluster&.stop }

    it "reports its master from every sentinel, and redis-rb finds it through them" do
      master_port = cluster.current_master_port # the examples run in random order: maybe after the failover
      expect(cluster.servers.map(&:port)).to include(master_port)
      expect(cluster.sentinels.size).to eq(3)
      cluster.sentinels.each do |sentinel|
        reply = Redis.new(**sentinel).call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", cluster.master_name)
        expect(reply).to eq(["127.0.0.1", master_port.to_s])
      end
      client = Redis.new(**cluster.redis_rb_options, role: :master)
      client.set("via-sentinel", "1")
      expect(cluster.server(master_port).redis.get("via-sentinel")).to eq("1")
    end

    it "fails over: the replica becomes the master and accepts writes, the old master turns READONLY" do
      old_port = cluster.current_master_port
      new_port = cluster.failover!
      expect(new_port).not_to eq(old_port)
      expect(cluster.current_master_port).to eq(new_port)
      expect(cluster.last_failover_seconds).to be < 10
      expect(cluster.server(new_port).redis.set("after-failover", "1")).to eq("OK")

      cluster.wait_until_replica(old_port, of: new_port)
      expect { cluster.server(old_port).redis.set("after-failover", "2") }
        .to raise_error(Redis::BaseError, /READONLY/)
      client = Redis.new(**cluster.redis_rb_options, role: :master)
      expect(client.get("after-failover")).to eq("1")
    end
  end

  it "starts a Sentinel cluster whose sentinels and servers want passwords" do
    password = RedisServer::ODD_PASSWORD
    cluster = SentinelCluster.new(password: password, sentinel_password: "sentinel #{password}").start
    client = Redis.new(**cluster.redis_rb_options, password: password)
    expect(client.set("k", "v")).to eq("OK")
    sentinel = cluster.sentinels.first.merge(password: nil)
    expect { Redis.new(**sentinel).call("SENTINEL", "MASTERS") }.to raise_error(Redis::CommandError, /NOAUTH/)
  ensure
    cluster&.stop
  end

  it "starts a Sentinel cluster on TLS only: redis-rb finds the master through a TLS sentinel" do
    certs = TestCertificates.shared
    cluster = SentinelCluster.new(sentinels: 1, quorum: 1, tls: certs).start
    tls = { ssl: true, ssl_params: certs.ssl_params }
    client = Redis.new(**cluster.redis_rb_options, **tls)
    expect(client.set("k", "v")).to eq("OK")
    expect(client.connection[:port]).to eq(cluster.master_port)
    sentinel = cluster.sentinels.first
    expect do
      Redis.new(**sentinel, timeout: 0.5, reconnect_attempts: 0).ping
    end.to raise_error(Redis::BaseConnectionError)
  ensure
    cluster&.stop
  end
end
