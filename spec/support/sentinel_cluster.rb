# frozen_string_literal: true

require_relative "redis_server"
require_relative "sentinel_server"

# One master, one replica and three sentinels (quorum 2), all private redis-servers on free
# loopback ports, stopped by pid (and at exit). #start returns once every sentinel reports the
# master and sees the replica and the other sentinels; #failover! makes the replica the master.
#
# password: requirepass (and masterauth) on master and replica, `sentinel auth-pass` on the
# sentinels; sentinel_password: requirepass on the sentinels themselves. tls: TestCertificates puts every
# server and sentinel on TLS only (replication and the sentinels' links too).
class SentinelCluster # rubocop:disable Metrics/ClassLength -- five servers' start, waits and failover
  TIMEOUT = 15

  attr_reader :master_name, :password, :sentinel_password, :sentinel_servers, :last_failover_seconds

  # rubocop:disable Metrics/ParameterLists
  def initialize(master_name: "fair_tenant", sentinels: 3, quorum: 2, password: nil, sentinel_password: nil,
                 down_after: 1000, failover_timeout: 5000, tls: nil)
    @master_name = master_name
    @password = password
    @sentinel_password = sentinel_password
    auth = password ? ["--masterauth", password] : [] # the master becomes a replica after a failover
    @first_master = RedisServer.new(password: password, args: auth, loglevel: "notice", tls: tls)
    @first_replica = RedisServer.new(password: password, args: auth, replica_of: @first_master, tls: tls)
    @sentinel_servers = Array.new(sentinels) do
      SentinelServer.new(master_name: master_name, master_port: @first_master.port, quorum: quorum,
                         password: sentinel_password, master_password: password,
                         down_after: down_after, failover_timeout: failover_timeout, tls: tls)
    end
    introduce
  end
  # rubocop:enable Metrics/ParameterLists

  def start
    @first_master.start
    @first_replica.start
    @sentinel_servers.each(&:start)
    @sentinel_servers.each { |sentinel| wait_until_watching(sentinel) }
    self
  rescue StandardError
    stop # the caller never gets the cluster to stop
    raise
  end

  def stop
    [*@sentinel_servers, @first_replica, @first_master].each(&:stop)
  end

  # The sentinels' addresses, as redis-rb's `sentinels:` option takes them (with the sentinels'
  # password when they have one).
  def sentinels
    @sentinel_servers.map do |s|
      { host: "127.0.0.1", port: s.port }.merge(sentinel_password ? { password: sentinel_password } : {})
    end
  end

  # redis-rb's options to reach the master through the sentinels: 4.8 takes its name as `host:`, 5.0 on as `name:`.
  def redis_rb_options
    { (Redis::VERSION.to_i >= 5 ? :name : :host) => master_name, sentinels: sentinels }
  end

  # The port of the master the cluster started with (see #current_master_port after a failover).
  def master_port
    @first_master.port
  end

  def replica_port
    @first_replica.port
  end

  # The master the sentinels report now (the first sentinel that answers).
  def current_master_port
    @sentinel_servers.each do |sentinel|
      addr = sentinel.master_addr
      return addr[1] if addr
    rescue Redis::BaseError
      next
    end
    raise "no sentinel of #{master_name} answers"
  end

  # The RedisServer (master or replica) on a port.
  def server(port)
    [@first_master, @first_replica].find { |s| s.port == port } || raise(ArgumentError, "no server on port #{port}")
  end

  def servers
    [@first_master, @first_replica]
  end

  # SENTINEL FAILOVER, then waits until every sentinel reports the other server as the master and
  # that one answers ROLE as a master; returns its port (and the time it took in
  # #last_failover_seconds). With wait_for_old_master: also until the old master is its replica.
  def failover!(timeout: TIMEOUT, wait_for_old_master: false)
    old_port = current_master_port
    new_port = (servers.map(&:port) - [old_port]).first
    started = monotonic
    request_failover(timeout)
    wait_until_master(new_port, timeout)
    @last_failover_seconds = monotonic - started
    wait_until_replica(old_port, of: new_port, timeout: timeout) if wait_for_old_master
    new_port
  end

  # Waits until the server on `port` is a replica of the one on `of` with its link up (Sentinel
  # turns an old master into a replica a moment after the failover).
  def wait_until_replica(port, of: current_master_port, timeout: TIMEOUT)
    server(port).wait_until("ROLE slave of 127.0.0.1:#{of} with master_link_status:up", timeout: timeout) do
      conn = server(port).redis(timeout: 1, reconnect_attempts: 0)
      begin
        role = conn.role
        role[0] == "slave" && role[2] == of && conn.info("replication")["master_link_status"] == "up"
      ensure
        conn.close
      end
    end
  end

  private

  def introduce
    @sentinel_servers.each do |sentinel|
      sentinel.know_replica(@first_replica.port)
      (@sentinel_servers - [sentinel]).each { |other| sentinel.know_sentinel(other) }
    end
  end

  # The master at its address, the replica up and INFOed (a failover needs that), the others linked.
  def wait_until_watching(sentinel)
    others = @sentinel_servers.size - 1
    sentinel.wait_until("#{master_name} at 127.0.0.1:#{master_port}, its replica and #{others} other sentinels",
                        timeout: TIMEOUT) do
      sentinel.master_addr == ["127.0.0.1", master_port] &&
        sentinel.sentinel("REPLICAS").any? { |r| good_replica?(r, replica_port) } &&
        sentinel.sentinel("SENTINELS").count { |s| s["flags"] == "sentinel" } == others
    end
  end

  def good_replica?(info, port)
    info["port"] == port.to_s && info["flags"] == "slave" && info["master-link-status"] == "ok"
  end

  # A sentinel that has just seen a failover or a restart may not trust the replica yet
  # (NOGOODSLAVE) or still finish the last failover (INPROG): asks again until it accepts.
  def request_failover(timeout)
    sentinel = @sentinel_servers.first
    sentinel.wait_until("SENTINEL FAILOVER #{master_name} to be accepted", timeout: timeout) do
      sentinel.sentinel("FAILOVER") == "OK"
    end
  end

  def wait_until_master(port, timeout)
    @sentinel_servers.each do |sentinel|
      sentinel.wait_until("#{master_name} to move to 127.0.0.1:#{port}", timeout: timeout) do
        sentinel.master_addr == ["127.0.0.1", port]
      end
    end
    server(port).wait_until("ROLE master", timeout: timeout) do
      conn = server(port).redis(timeout: 1, reconnect_attempts: 0)
      begin
        conn.role[0] == "master"
      ensure
        conn.close
      end
    end
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
