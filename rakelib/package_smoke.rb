# frozen_string_literal: true

# Run by `rake package:smoke` against the gem installed in a temporary GEM_HOME, and by `rake package:native_smoke`
# on a fresh Debian root: loads it, checks which gem and extension were loaded (SMOKE_GEM_HOME, SMOKE_PLATFORM),
# then pushes a job that must be re-routed to its throttled queue, using a redis-server of its own.

require "socket"

def free_port
  server = TCPServer.new("127.0.0.1", 0)
  server.addr[1]
ensure
  server&.close
end

def wait_for_redis(port, pid)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
  loop do
    abort "redis-server exited early" if Process.waitpid(pid, Process::WNOHANG)
    begin
      TCPSocket.new("127.0.0.1", port).close
      return
    rescue SystemCallError
      abort "redis-server did not start on port #{port}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.05
    end
  end
end

def check(description, passed)
  puts "#{passed ? "ok" : "FAILED"}: #{description}"
  exit 1 unless passed
end

require "sidekiq-fair_tenant-rs"
# Sidekiq 6.4 on redis-rb 4.8 (7.x and 8.x use redis-client)
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

dlext = RbConfig::CONFIG["DLEXT"]
native = $LOADED_FEATURES.grep(%r{/sidekiq/fair_tenant/(\d+\.\d+/)?fair_tenant_rs\.#{dlext}\z}).first
puts "loaded #{native}"
check("extension loaded from #{ENV.fetch("SMOKE_GEM_HOME")}", native&.start_with?(ENV.fetch("SMOKE_GEM_HOME")))
check("no demo or bench hooks (cargo feature bench off)",
      !Sidekiq::FairTenant::Native::Fair.respond_to?(:simulate) &&
        !Sidekiq::FairTenant::Native::Client.method_defined?(:noop_eval) &&
        !Sidekiq::FairTenant::Native::Router.method_defined?(:route_args))
spec = Gem.loaded_specs.fetch("sidekiq-fair_tenant-rs")
check("#{spec.full_name} loaded, platform #{ENV.fetch("SMOKE_PLATFORM")}", spec.platform.to_s == ENV["SMOKE_PLATFORM"])
if spec.platform.to_s != "ruby"
  minor = RUBY_VERSION[/\A\d+\.\d+/]
  version_dir = "#{spec.full_gem_path}/lib/sidekiq/fair_tenant/#{minor}/"
  check("the platform gem's library for Ruby #{minor}", native.start_with?(version_dir))
end
puts "build_info: #{Sidekiq::FairTenant::Native.build_info}"

port = free_port
pid = Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--daemonize", "no", out: File::NULL)
begin
  wait_for_redis(port, pid)
  url = "redis://127.0.0.1:#{port}/0"
  ENV["REDIS_URL"] = url

  job_class = Class.new do
    include Sidekiq::Worker

    sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "throttled", threshold: 0, per: 60 }]

    def perform(_arg); end
  end
  Object.const_set(:PackageSmokeJob, job_class)

  jid = PackageSmokeJob.set(fair_tenant: "t1").perform_async(1)
  check("job pushed (jid #{jid.inspect})", !jid.nil?)

  size = ->(queue) { Sidekiq.redis { |conn| conn.call("LLEN", "queue:#{queue}") } }
  check("queue:throttled holds the job", size.call("throttled") == 1)
  check("queue:default is empty", size.call("default").zero?)
ensure
  Process.kill("TERM", pid)
  Process.wait(pid)
end
