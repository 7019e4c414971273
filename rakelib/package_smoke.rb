# frozen_string_literal: true

# Run by `rake package:smoke` against the gem installed in a temporary GEM_HOME, and by rakelib/native_smoke.sh
# on a fresh Debian root: loads it, checks which gem and extension were loaded (SMOKE_GEM_HOME, SMOKE_PLATFORM),
# then, on a redis-server of its own, pushes a job that must be re-routed to its throttled queue, and one into a
# fair queue that a real `sidekiq` process must fetch (only FairFetch can: the job is not in queue:fair) and run.

require "socket"
require "tmpdir"

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

# A job of tenant t2 in the fair queue `fair`, fetched and run by a `sidekiq` server process of this Ruby.
def fair_fetch(url, native, size)
  PackageSmokeFairJob.perform_async("t2")
  stats = -> { Sidekiq::FairTenant.fair_stats.queues.find { |queue| queue[:queue] == "fair" } || {} }
  check("the fair queue's backlog holds the job, queue:fair is empty",
        stats.call[:backlog] == 1 && size.call("fair").zero?)

  ran = run_sidekiq(url)
  check("a sidekiq #{Sidekiq::VERSION} process fair-fetched and ran it: #{ran.inspect}",
        ran&.start_with?("t2 ") && ran.split(" ", 2).last == native)
  check("the fair queue's backlog is empty", stats.call[:backlog].to_i.zero?)
end

# Starts `sidekiq` on the queue `fair` until the job has run (or 60 s), stops it; the job's record, or nil.
def run_sidekiq(url)
  Dir.mktmpdir("package_smoke") do |dir|
    log = File.join(dir, "sidekiq.log")
    cmd = [RbConfig.ruby, Gem.bin_path("sidekiq", "sidekiq"), "-r", APP, "-q", "fair", "-c", "1", "-t", "2"]
    pid = Process.spawn({ "REDIS_URL" => url }, *cmd, out: log, err: log)
    ran = wait_for_job(pid)
    stop_process(pid)
    puts File.read(log) unless ran
    ran
  end
end

def wait_for_job(pid)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
  until Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline || Process.waitpid(pid, Process::WNOHANG)
    ran = Sidekiq.redis { |conn| conn.call("LINDEX", PackageSmokeFairJob::RAN, 0) }
    return ran if ran

    sleep 0.2
  end
  nil
end

def stop_process(pid)
  Process.kill("TERM", pid)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
  until Process.waitpid(pid, Process::WNOHANG)
    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      Process.kill("KILL", pid)
      Process.wait(pid)
      break
    end
    sleep 0.1
  end
rescue Errno::ESRCH, Errno::ECHILD
  nil # it had exited already
end

APP = File.expand_path("package_smoke_app.rb", __dir__)
require APP # the gem, and the fair job

dlext = RbConfig::CONFIG["DLEXT"]
native = $LOADED_FEATURES.grep(%r{/sidekiq/fair_tenant/(\d+\.\d+/)?fair_tenant_rs\.#{dlext}\z}).first
puts "loaded #{native}"
check("extension loaded from #{ENV.fetch("SMOKE_GEM_HOME")}", native&.start_with?(ENV.fetch("SMOKE_GEM_HOME")))
check("no demo or bench hooks (cargo feature bench off)",
      !Sidekiq::FairTenant::Native::Fair.respond_to?(:simulate) &&
        !Sidekiq::FairTenant::Native::Client.method_defined?(:noop_eval) &&
        !Sidekiq::FairTenant::Native::Router.method_defined?(:route_args))
# The slot API kept for specs (and bin/bench): Client#slots, Slots.new(client) and the Slots instances' methods.
check("no spec-only slot API: Client#slots, Slots.new(client), Slots#acquire and the others (feature bench off)",
      !Sidekiq::FairTenant::Native::Client.method_defined?(:slots) &&
        !Sidekiq::FairTenant::Native::Slots.singleton_methods(false).include?(:new) &&
        Sidekiq::FairTenant::Native::Slots.instance_methods(false).empty?)
spec = Gem.loaded_specs.fetch("sidekiq-fair_tenant-rs")
check("#{spec.full_name} loaded, platform #{ENV.fetch("SMOKE_PLATFORM")}", spec.platform.to_s == ENV["SMOKE_PLATFORM"])
if spec.platform.to_s != "ruby"
  minor = RUBY_VERSION[/\A\d+\.\d+/]
  version_dir = "#{spec.full_gem_path}/lib/sidekiq/fair_tenant/#{minor}/"
  check("the platform gem's library for Ruby #{minor}", native.start_with?(version_dir))
end
build_info = Sidekiq::FairTenant::Native.build_info
puts "build_info: #{build_info}"
check("built for Ruby #{RUBY_VERSION[/\A\d+\.\d+/]}", build_info[:ruby_api_version] == RbConfig::CONFIG["ruby_version"])

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

  fair_fetch(url, native, size)
ensure
  Process.kill("TERM", pid)
  Process.wait(pid)
end
