# frozen_string_literal: true

require "securerandom"
require_relative "redis_server"

# One `redis-server sentinel.conf --sentinel` on a free loopback port, watching one master. Its
# config file (which Sentinel rewrites) lives in its own tmpdir; SentinelCluster starts three.
# `know_replica`/`know_sentinel` (before #start) write the replica and the other sentinels into the
# config, so they are known at once instead of after Sentinel's discovery (up to 10 s).
class SentinelServer < RedisServer
  # Sentinel's internal periods (ms, `SENTINEL DEBUG`, Redis 7.0+), shortened so a spec does not
  # wait for them: INFO to the instances, PING (also how soon a failed link is retried: the other
  # sentinels may not listen yet when one starts), questions to the other sentinels, and TILT.
  # publish-period (hello messages, default 2000) stays at 1000: a sentinel turns a replica that
  # reports itself master back into a replica after 4 publish periods, unless a hello told it about
  # the failover first, and the sentinel doing the failover sees its promotion only with its next INFO
  # (every 1000 ms during a failover, whatever info-period says). 4 x 1000 leaves room for that;
  # it is also how long an old master still up waits before it is made a replica.
  DEBUG_PERIODS = { "info-period" => 100, "ping-period" => 100, "publish-period" => 1000, "ask-period" => 100,
                    "tilt-period" => 1000 }.freeze

  attr_reader :master_name, :myid, :config_file

  # rubocop:disable Metrics/ParameterLists
  def initialize(master_name:, master_port:, quorum: 2, port: nil, password: nil, master_password: nil,
                 down_after: 1000, failover_timeout: 5000, tls: nil)
    super(port: port, password: password, loglevel: "notice", tls: tls)
    @master_name = master_name
    @master_port = master_port
    @quorum = quorum
    @master_password = master_password
    @down_after = down_after
    @failover_timeout = failover_timeout
    @myid = SecureRandom.hex(20)
    @config_file = File.join(dir, "sentinel.conf")
    @known = []
  end
  # rubocop:enable Metrics/ParameterLists

  def know_replica(port)
    @known << "sentinel known-replica #{master_name} 127.0.0.1 #{port}"
  end

  def know_sentinel(sentinel)
    @known << "sentinel known-sentinel #{master_name} 127.0.0.1 #{sentinel.port} #{sentinel.myid}"
  end

  def start
    write_config unless File.exist?(config_file) # on a restart, the config Sentinel rewrote
    super
  end

  # The master's address this sentinel reports, as [host, port], or nil.
  def master_addr
    with_admin do |conn|
      host, port = conn.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name)
      host && [host, Integer(port)]
    end
  end

  # SENTINEL <subcommand> master_name ..., each reply as a Hash when it is a flat list of pairs.
  def sentinel(subcommand, *args)
    with_admin { |conn| conn.call("SENTINEL", subcommand, master_name, *args) }
      .then { |reply| reply.is_a?(Array) && reply.all?(Array) ? reply.map { |r| Hash[*r] } : reply }
  end

  def describe
    "sentinel #{myid[0, 8]} on 127.0.0.1:#{port}"
  end

  private

  def write_config
    File.write(config_file, <<~CONF + tls_config + @known.map { |line| "#{line}\n" }.join)
      port #{tls ? 0 : port}
      bind 127.0.0.1
      daemonize no
      dir #{quote(dir)}
      loglevel notice
      sentinel myid #{myid}
      sentinel resolve-hostnames no
      #{password ? "requirepass #{quote(password)}\nsentinel sentinel-pass #{quote(password)}" : ""}
      sentinel monitor #{master_name} 127.0.0.1 #{@master_port} #{@quorum}
      sentinel down-after-milliseconds #{master_name} #{@down_after}
      sentinel failover-timeout #{master_name} #{@failover_timeout}
      sentinel parallel-syncs #{master_name} 1
      #{@master_password ? "sentinel auth-pass #{master_name} #{quote(@master_password)}" : ""}
    CONF
  end

  # With tls: clients (and the other sentinels) reach it over TLS only, and it speaks TLS to the
  # master, the replicas and the other sentinels (tls-replication).
  def tls_config
    return "" unless tls

    { "tls-port" => port, "tls-cert-file" => tls.server_cert, "tls-key-file" => tls.server_key,
      "tls-ca-cert-file" => tls.ca_file, "tls-auth-clients" => "no", "tls-replication" => "yes",
      "tls-client-cert-file" => tls.client_cert, "tls-client-key-file" => tls.client_key }
      .map { |name, value| "#{name} #{quote(value)}\n" }.join
  end

  # A double-quoted config argument (Redis reads it with sdssplitargs).
  def quote(value)
    "\"#{value.to_s.gsub(/["\\]/) { |c| "\\#{c}" }}\""
  end

  def binary
    "redis-server"
  end

  def server_args
    [config_file, "--sentinel"]
  end

  def own_server?(conn)
    conn.info("server")["config_file"] == File.realpath(config_file)
  end

  def after_start
    return if self.class.redis_version < Gem::Version.new("7")

    with_admin { |conn| DEBUG_PERIODS.each { |name, ms| conn.call("SENTINEL", "DEBUG", name, ms) } }
  end
end
