# frozen_string_literal: true

require "fileutils"
require "set"
require "socket"
require "tmpdir"
require "redis"

# A private redis-server on a free loopback port, for specs, benchmarks and the demo.
# Every server started here is stopped at exit, also when the run is interrupted.
#
# Besides a plain server it can start (all keywords optional, combinable):
#   tls: TestCertificates            TLS only (`--port 0 --tls-port N`), #url is rediss://
#   tls_auth_clients: true|:optional  mutual TLS (default false: no client certificate asked for)
#   password: "..."                   requirepass (the default user's password)
#   users: { "name" => "password" }   ACL users allowed everything; default_user: false turns `default` off
#   unixsocket: true                  a unix socket (perm 700) in the server's tmpdir and no TCP port
#   replica_of: RedisServer           a replica of that server; #start waits for master_link_status:up
#   args: [...]                       more redis-server arguments
# The binary is redis-server, or the one FAIR_TENANT_REDIS_SERVER names (valkey-server: the same options).
# Its stdout/stderr go to #log; a start that fails or times out raises with the log's tail.
class RedisServer # rubocop:disable Metrics/ClassLength -- one server's options, start, waits and stop
  # A password URLs have to escape: space, @, :, /, %, +, # and ?.
  ODD_PASSWORD = "p@ss w:rd/%+#?"
  POLL = 0.025
  START_TIMEOUT = 10

  # Raised when the server exits while #start waits for it (not retried, unlike connection errors).
  class Exited < StandardError; end

  attr_reader :port, :pid, :dir, :log, :tls, :password, :users, :socket_path, :replica_of

  # Where the kernel takes the local ports of outgoing connections (a client's, a replica's link, a sentinel's).
  EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
  # The lowest port handed out when the ephemeral range leaves room below it.
  PORT_FLOOR = 10_000

  # A loopback port free now and never handed out before in this process: servers of one spec (a Sentinel
  # cluster's) take their ports before the first of them binds, and the kernel may offer a closed port again.
  # Ports come from below the kernel's ephemeral range, at random: a port the kernel offers for `bind(0)` may
  # become an outgoing connection's local port before the server binds it (a sentinel then exits with
  # "Address already in use"; its port is already in the other sentinels' configs, so it cannot move).
  def self.free_port
    @handed_out ||= Set.new
    ports = ports_below_ephemeral
    loop do
      port = ports ? rand(ports) : kernel_free_port
      return port if @handed_out.add?(port) && bindable?(port)
    end
  end

  # PORT_FLOOR up to the ephemeral range's first port, or nil (then the kernel picks) when that leaves
  # fewer than 1000 ports or the range cannot be read.
  def self.ports_below_ephemeral
    low = Integer(File.read(EPHEMERAL_RANGE_FILE).split.first, exception: false)
    low && low - PORT_FLOOR >= 1000 ? (PORT_FLOOR...low) : nil
  rescue SystemCallError
    nil
  end

  def self.kernel_free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  def self.bindable?(port)
    TCPServer.new("127.0.0.1", port).close
    true
  rescue SystemCallError
    false
  end

  # The server binary the specs start (sentinels always run redis-server: SentinelServer).
  def self.binary
    ENV.fetch("FAIR_TENANT_REDIS_SERVER", "redis-server")
  end

  # The installed redis-server's version (options and SENTINEL DEBUG that need 7.0 are left out before).
  def self.redis_version
    @redis_version ||= version_of("redis-server")
  end

  # `redis-server --version` and `valkey-server --version` both print v=X.Y.Z.
  def self.version_of(binary)
    (@versions ||= {})[binary] ||= Gem::Version.new(IO.popen([binary, "--version"], &:read)[/v=([\d.]+)/, 1] || "0")
  end

  # rubocop:disable Metrics/ParameterLists
  def initialize(port: nil, tls: nil, tls_auth_clients: false, password: nil, users: {}, default_user: true,
                 unixsocket: false, replica_of: nil, args: [], loglevel: nil)
    @unixsocket = unixsocket
    @port = port || (unixsocket ? nil : self.class.free_port)
    @dir = Dir.mktmpdir("fair-tenant-redis")
    @log = File.join(@dir, "redis.log")
    @socket_path = File.join(@dir, "redis.sock") if unixsocket
    @tls = tls
    @tls_auth_clients = tls_auth_clients
    @password = password
    @users = users.transform_keys(&:to_s)
    @default_user = default_user
    @replica_of = replica_of
    @extra_args = args
    @loglevel = loglevel || (replica_of ? "notice" : "warning")
    @pid = nil
    check_options
  end
  # rubocop:enable Metrics/ParameterLists

  # redis://127.0.0.1:PORT/DB, rediss:// with TLS, unix://PATH?db=DB for a socket. With credentials
  # (the default) it carries the password (of `user` when given, else the default user's), each
  # part percent-encoded (a space is %20, never "+"). A socket URL carries them as userinfo
  # (unix://:PASS@/path?db=0) or, with unix_auth: :query, the way the
  # Rust redis crate reads them (unix:///path?db=0&user=USER&pass=PASS; it ignores userinfo there).
  def url(db = 0, user: nil, credentials: true, unix_auth: :userinfo)
    auth = credentials ? credentials(user) : {}
    return unix_url(db, auth, unix_auth) if @unixsocket && !port

    "#{tls ? "rediss" : "redis"}://#{userinfo(auth)}127.0.0.1:#{port}/#{db}"
  end

  def start
    return self if running?

    @pid = Process.spawn("sh", "-c", WATCHDOG, "watchdog", Process.pid.to_s, binary, *server_args,
                         %i[out err] => [@log, "a"], pgroup: true)
    RedisServer.started << self # SentinelServer's too: one list for stop_all
    wait_until_ready
    after_start
    self
  end

  # TERM to the watchdog's process group (the watchdog and redis-server at once), KILL after 10 s.
  def stop
    return unless @pid

    signal("TERM")
    return if wait_for_exit(10)

    signal("KILL")
    wait_for_exit(5)
  ensure
    @pid = nil
  end

  def running?
    !@pid.nil?
  end

  # A client for this server: TLS (verified against the test CA, with the client certificate when
  # the server asks for one), unix socket and credentials as the server needs. `user:` picks an ACL
  # user; any other option (password: nil, ssl_params: ..., timeout: ...) overrides.
  def redis(user: nil, **options)
    Redis.new(**client_options(user: user), **options)
  end

  def client_options(user: nil)
    options = @unixsocket && !port ? { path: socket_path } : { host: "127.0.0.1", port: port }
    options[:timeout] = 5
    if tls && port # a unix socket is never TLS
      options[:ssl] = true
      options[:ssl_params] = tls.ssl_params(client: @tls_auth_clients ? true : false)
    end
    options.merge(credentials(user))
  end

  # Waits until the block returns a truthy value (polled every POLL seconds), raising an error
  # naming this server, with its log's tail, after `timeout` seconds.
  def wait_until(what, timeout: START_TIMEOUT)
    deadline = monotonic + timeout
    last_error = nil
    loop do
      begin
        result = yield
        return result if result
      rescue Exited
        raise
      rescue StandardError => e
        last_error = e
      end
      raise timeout_error(what, timeout, last_error) if monotonic > deadline

      sleep POLL
    end
  end

  def log_tail(lines = 20)
    File.exist?(@log) ? File.readlines(@log).last(lines).join : "(no log at #{@log})"
  end

  def describe
    "#{self.class.name} #{@unixsocket && !port ? socket_path : "127.0.0.1:#{port}"}"
  end

  def self.started
    @started ||= []
  end

  def self.stop_all
    started.each(&:stop)
    started.each(&:remove_dir) unless ENV["FAIR_TENANT_KEEP_REDIS_DIRS"]
  end

  def remove_dir
    FileUtils.rm_rf(@dir)
  end

  # Runs the server binary and stops it when asked (TERM) or when the process that started it is
  # gone, even if that process crashed before its at_exit hooks ran.
  WATCHDOG = <<~SH
    parent=$1; binary=$2; shift 2
    "$binary" "$@" & server=$!
    trap 'kill $server 2>/dev/null; wait $server; exit 0' TERM INT
    while kill -0 "$parent" 2>/dev/null && kill -0 "$server" 2>/dev/null; do sleep 0.5; done
    kill $server 2>/dev/null; wait $server
  SH

  private

  def binary
    self.class.binary
  end

  def server_args
    args = ["--port", (tls || !port ? 0 : port).to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--enable-debug-command", "local", "--dir", @dir, "--daemonize", "no", "--loglevel", @loglevel,
            "--repl-diskless-sync-delay", "0"] # a replica's first sync starts at once, not after 5 s
    # A master stopped with TERM does not wait (up to 10 s) for its replicas to catch up.
    args += ["--shutdown-timeout", "0"] if self.class.version_of(binary) >= Gem::Version.new("7")
    args + tls_args + socket_args + auth_args + replica_args + @extra_args.map(&:to_s)
  end

  def check_options
    raise ArgumentError, "default_user: false needs users:" if !@default_user && users.empty?
    return unless replica_of
    raise ArgumentError, "replica_of needs a server with a TCP port" unless replica_of.port
    raise ArgumentError, "a replica of a TLS server needs tls: too" if replica_of.tls && !tls
  end

  def tls_args
    return [] unless tls

    auth_clients = { true => "yes", false => "no", optional: "optional" }.fetch(@tls_auth_clients)
    ["--tls-port", port.to_s, "--tls-cert-file", tls.server_cert, "--tls-key-file", tls.server_key,
     "--tls-ca-cert-file", tls.ca_file, "--tls-auth-clients", auth_clients,
     # As a replica of a TLS master (or when the master asks for client certificates).
     "--tls-client-cert-file", tls.client_cert, "--tls-client-key-file", tls.client_key]
  end

  def socket_args
    @unixsocket ? ["--unixsocket", socket_path, "--unixsocketperm", "700"] : []
  end

  # ACL users come as `user` directives, so they exist from the first PING (and after a restart).
  def auth_args
    args = password ? ["--requirepass", password] : []
    users.each { |name, pass| args += ["--user", name, "reset", "on", ">#{pass}", "~*", "&*", "+@all"] }
    args += %w[--user default off] unless @default_user
    args
  end

  def replica_args
    return [] unless replica_of

    master_auth = replica_of.client_options
    args = ["--replicaof", "127.0.0.1", replica_of.port.to_s]
    args += ["--masteruser", master_auth[:username]] if master_auth[:username]
    args += ["--masterauth", master_auth[:password]] if master_auth[:password]
    args += ["--tls-replication", "yes"] if replica_of.tls
    args
  end

  # The admin credentials (user nil): the default user's password, or the first ACL user's when
  # the default user is off.
  def credentials(user)
    if user
      { username: user.to_s, password: users.fetch(user.to_s) }
    elsif !@default_user && users.any?
      { username: users.keys.first, password: users.values.first }
    elsif password
      { password: password }
    else
      {}
    end
  end

  def userinfo(auth)
    return "" unless auth[:password]

    "#{auth[:username] ? escape(auth[:username]) : ""}:#{escape(auth[:password])}@"
  end

  def unix_url(db, auth, style)
    case style
    when :userinfo then "unix://#{userinfo(auth)}#{socket_path}?db=#{db}"
    when :query
      query = { db: db, user: auth[:username], pass: auth[:password] }.compact
      "unix://#{socket_path}?#{query.map { |k, v| "#{k}=#{escape(v)}" }.join("&")}"
    else raise ArgumentError, "unix_auth must be :userinfo or :query"
    end
  end

  def escape(part)
    part.to_s.b.gsub(/[^A-Za-z0-9\-._~]/) { |c| format("%%%02X", c.ord) }
  end

  def wait_until_ready
    wait_until("it to answer PING") do
      raise_if_exited
      conn = Redis.new(**client_options, timeout: 0.5, reconnect_attempts: 0)
      begin
        conn.ping == "PONG" && own_server?(conn)
      ensure
        conn.close
      end
    end
  end

  # Another process may have taken the port between free_port and the start: make sure the server
  # answering is this one.
  def own_server?(conn)
    conn.config(:get, "dir")["dir"] == File.realpath(@dir)
  end

  def after_start
    return unless replica_of

    wait_until("master_link_status:up (replica of #{replica_of.describe})") do
      raise_if_exited
      with_admin { |conn| conn.info("replication")["master_link_status"] == "up" }
    end
  end

  def with_admin
    conn = Redis.new(**client_options, timeout: 1, reconnect_attempts: 0)
    yield conn
  ensure
    conn&.close
  end

  def raise_if_exited
    return unless @pid && Process.waitpid(@pid, Process::WNOHANG)

    @pid = nil
    raise Exited, "#{describe} exited during its start; log #{@log}:\n#{log_tail}"
  end

  def timeout_error(what, timeout, last_error)
    cause = last_error ? " (last error: #{last_error.class}: #{last_error.message})" : ""
    RuntimeError.new("#{describe}: timed out after #{timeout} s waiting for #{what}#{cause}; " \
                     "log #{@log}:\n#{log_tail}")
  end

  def signal(name)
    Process.kill(name, -@pid)
  rescue Errno::ESRCH
    nil
  end

  def wait_for_exit(timeout)
    deadline = monotonic + timeout
    until Process.waitpid(@pid, Process::WNOHANG)
      return false if monotonic > deadline

      sleep POLL
    end
    true
  rescue Errno::ECHILD
    true
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

at_exit { RedisServer.stop_all }
