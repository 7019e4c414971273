# frozen_string_literal: true

# The demo (bin/demo runs it after bin/setup, under Bundler): what a greedy tenant does to everyone
# else's wait: plain Sidekiq (FIFO), fair-tenant re-routing, and re-routing plus per-tenant concurrency
# slots, side by side.
# Real Sidekiq server processes (demo/app.rb) run the jobs; this process enqueues, waits, reports and
# charts (gnuplot). Each mode runs on a freshly flushed Redis DB: REDIS_URL if given (it is flushed!),
# else a private redis-server. The Sidekiq version is the bundle's: BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile
# runs it on Sidekiq 7.3.
ROOT = File.expand_path("..", __dir__)
$LOAD_PATH.unshift(File.join(ROOT, "lib"))
require "fileutils"
require "json"
require "logger"
require "optparse"
require_relative "report"

SMALL_JOBS_PER_TENANT = 3
MODES = %w[plain fair_tenant fair_tenant+slots].freeze
MODE_ALIASES = { "slots" => "fair_tenant+slots" }.freeze
SCENARIOS = %w[mega-merchant two-megas long-jobs].freeze

options = { scenario: "mega-merchant", jobs: nil, threads: 10, job_ms: nil, small_tenants: 20, seed: 1,
            slot_limit: nil, modes: MODES.dup, out: File.join(ROOT, "tmp/demo") }
OptionParser.new do |o|
  o.banner = "Usage: bin/demo [options]"
  o.on("--scenario NAME", SCENARIOS, "#{SCENARIOS.join("|")} (default mega-merchant)") { |v| options[:scenario] = v }
  o.on("--jobs N", Integer, "greedy jobs (default 3000; long-jobs: 300)") { |v| options[:jobs] = v }
  o.on("--threads N", Integer, "Sidekiq threads (default 10)") { |v| options[:threads] = v }
  o.on("--job-ms MS", Float, "job length (default 20; long-jobs: 200)") { |v| options[:job_ms] = v }
  o.on("--small-tenants N", Integer, "small tenants, #{SMALL_JOBS_PER_TENANT} jobs each (default 20)") do |v|
    options[:small_tenants] = v
  end
  o.on("--seed N", Integer, "random seed (default 1)") { |v| options[:seed] = v }
  o.on("--slot-limit N", Integer, "fair_tenant+slots: running jobs per tenant (default threads - 1)") do |v|
    options[:slot_limit] = v
  end
  o.on("--modes LIST", Array, "comma-separated, any of #{MODES.join(",")} (default all; slots = the third)") do |v|
    options[:modes] = v.map { |m| MODE_ALIASES.fetch(m, m) }
  end
  o.on("--out DIR", "chart and logs directory (default tmp/demo)") { |v| options[:out] = File.expand_path(v) }
end.parse!
options[:jobs] ||= options[:scenario] == "long-jobs" ? 300 : 3000
options[:job_ms] ||= options[:scenario] == "long-jobs" ? 200.0 : 20.0
options[:slot_limit] ||= [options[:threads] - 1, 1].max
unknown = options[:modes] - MODES
abort "bin/demo: unknown mode(s) #{unknown.join(", ")}; known: #{MODES.join(", ")}" if unknown.any?
abort "bin/demo: --slot-limit must be at least 1" unless options[:slot_limit].positive?

require_relative "../spec/support/redis_server"
unless ENV["REDIS_URL"]
  $redis_server = RedisServer.new.start # rubocop:disable Style/GlobalVars
  ENV["REDIS_URL"] = $redis_server.url # rubocop:disable Style/GlobalVars
end
# The gem's own keys (counters, slots, parked jobs) go to the same DB, which run_mode flushes.
ENV["SIDEKIQ_FAIR_TENANT_REDIS_URL"] = ENV.fetch("REDIS_URL")
ENV["FAIR_TENANT_DEMO_SLOT_LIMIT"] = options[:slot_limit].to_s # read by demo/app.rb, here and in Sidekiq
require "sidekiq"
require "sidekiq/fair_tenant"
require_relative "app"
Sidekiq.logger.level = Logger::WARN
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_client { |c| c.redis = { url: ENV.fetch("REDIS_URL"), size: 5 } }

def now = Time.now.to_f
def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"), timeout: 5)

# The workload: phases run one after the other; a phase's streams of [offset_s, tenant] are pushed
# concurrently, one thread each, offsets counted from the phase's start.
def schedule(opts)
  rng = Random.new(opts[:seed])
  small = (1..opts[:small_tenants]).flat_map { |k| Array.new(SMALL_JOBS_PER_TENANT, format("small-%02d", k)) }
  small.shuffle!(random: rng)
  n = opts[:jobs]
  return long_jobs_schedule(opts, small, rng) if opts[:scenario] == "long-jobs"

  # Half a second after the greedy burst, or sooner when the burst's backlog is shorter than 2 s.
  late = [0.5, n * opts[:job_ms] / 1000.0 / opts[:threads] / 4].min
  greedy = if opts[:scenario] == "two-megas"
             [Array.new(n / 2) { [0.0, "greedy-a"] }, Array.new(n - (n / 2)) { [late / 2, "greedy-b"] }]
           else
             [Array.new(n) { [0.0, "greedy"] }]
           end
  [greedy, [small.map { |t| [late, t] }]]
end

# The greedy tenant enqueues steadily at 1.5x what the threads can run; small tenants trickle meanwhile.
def long_jobs_schedule(opts, small, rng)
  rate = 1.5 * opts[:threads] * 1000.0 / opts[:job_ms]
  duration = opts[:jobs] / rate
  trickle = small.map { |t| [0.5 + (rng.rand * [duration - 0.5, 0.5].max), t] }.sort_by(&:first)
  [[Array.new(opts[:jobs]) { |i| [i / rate, "greedy"] }, trickle]]
end

def greedy?(tenant) = tenant.start_with?("greedy")

def enqueue(job_class, phases, job_ms)
  phases.each do |streams|
    t0 = now
    streams.map do |stream|
      Thread.new do
        stream.each do |offset, tenant|
          delay = t0 + offset - now
          sleep(delay) if delay.positive?
          job_class.set(fair_tenant: tenant).perform_async(tenant, now, job_ms)
        end
      end
    end.each(&:join)
  end
end

def sidekiq_bin
  Gem.bin_path("sidekiq", "sidekiq")
rescue Gem::Exception
  "sidekiq"
end

def start_sidekiq(threads, log)
  env = { "REDIS_URL" => ENV.fetch("REDIS_URL"), "FAIR_TENANT_DEMO_PARENT_PID" => Process.pid.to_s }
  pid = Process.spawn(env, Gem.ruby, "-I", File.join(ROOT, "lib"), sidekiq_bin, "-r", "./demo/app.rb",
                      "-c", threads.to_s, "-q", "default,4", "-q", "throttled,1", "-t", "5",
                      chdir: ROOT, pgroup: true, in: File::NULL, out: log, err: log)
  $sidekiq_pids << pid # rubocop:disable Style/GlobalVars
  deadline = now + 30
  until redis.scard("processes").positive? && redis.exists?(Demo::SERVER_VERSION_KEY)
    raise "Sidekiq did not start; see #{log}" if now > deadline || Process.wait(pid, Process::WNOHANG)

    sleep 0.05
  end
  $sidekiq_version ||= server_version # rubocop:disable Style/GlobalVars
  pid
end

# The Sidekiq version the server process itself loaded (demo/app.rb records it at startup).
def server_version
  redis.get(Demo::SERVER_VERSION_KEY) || "unknown"
end

def stop_process_group(pid)
  Process.kill("TERM", -pid)
  deadline = now + 10
  while now < deadline
    return if Process.wait(pid, Process::WNOHANG)

    sleep 0.05
  end
  Process.kill("KILL", -pid)
  Process.wait(pid)
rescue Errno::ESRCH, Errno::ECHILD
  nil
end

def stop_sidekiqs
  $sidekiq_pids.each { |pid| stop_process_group(pid) } # rubocop:disable Style/GlobalVars
  $sidekiq_pids.clear # rubocop:disable Style/GlobalVars
end

def progress(done, total)
  width = 30
  filled = total.zero? ? width : (width * done / total)
  $stderr.print("\r[#{"#" * filled}#{"." * (width - filled)}] #{done}/#{total} jobs")
end

def wait_for(total, timeout)
  deadline = now + timeout
  loop do
    done = redis.llen(Demo::RECORDS_KEY)
    progress(done, total)
    break if done >= total
    raise "timed out: #{done}/#{total} jobs finished after #{timeout.round} s" if now > deadline

    sleep 0.1
  end
ensure
  $stderr.puts
end

def run_mode(mode, opts)
  flush
  log = File.join(opts[:out], "sidekiq-#{mode}.log")
  pid = start_sidekiq(opts[:threads], log)
  phases = schedule(opts)
  total = phases.flatten(1).sum(&:size)
  warn "== #{mode}: #{total} jobs"
  enqueue(Demo::JOBS.fetch(mode), phases, opts[:job_ms])
  wait_for(total, 60 + (3.0 * total * opts[:job_ms] / 1000 / opts[:threads]))
  records = redis.lrange(Demo::RECORDS_KEY, 0, -1).map { |r| JSON.parse(r) }
  stop_process_group(pid)
  records
end

# Everything, including the gem's sidekiq-fair_tenant:* counters, slots and parked jobs of the last mode.
def flush
  redis.flushdb
  left = redis.scan_each(match: "sidekiq-fair_tenant:*").first(1)
  raise "flushdb left #{left.first}" if left.any?
end

def fmt(seconds) = seconds.nil? ? "-" : format("%.3fs", seconds)

def waits(records) = records.map { |r| r["started_at"] - r["enqueued_at"] }

def mode_report(mode, records, ideal, plain_greedy, opts)
  small = records.reject { |r| greedy?(r["tenant"]) }
  lines = { "small" => small, "greedy" => records.select { |r| greedy?(r["tenant"]) } }.map do |klass, rs|
    s = Demo::Report.summary(waits(rs))
    format("%-17s %-7s wait p50 %8s  p95 %8s  max %8s  (%d jobs)", mode, klass, fmt(s[:p50]), fmt(s[:p95]),
           fmt(s[:max]), s[:count])
  end
  lines << totals_line(mode, records, small, ideal)
  lines << greedy_line(mode, records, plain_greedy)
  lines << jain_line(mode, records) if opts[:scenario] == "two-megas"
  lines
end

def totals_line(mode, records, small, ideal)
  makespan = records.map { |r| r["finished_at"] }.max - records.map { |r| r["enqueued_at"] }.min
  p95 = Demo::Report.percentile(waits(small), 95) || Float::NAN
  format("%-17s makespan %.2fs  %.0f jobs/s  small p95 / ideal %.1fx", mode, makespan, records.size / makespan,
         p95 / ideal)
end

# The greedy tenants' first enqueue to their last finish; nil without greedy jobs.
def greedy_total(records)
  greedy = records.select { |r| greedy?(r["tenant"]) }
  return nil if greedy.empty?

  greedy.map { |r| r["finished_at"] }.max - greedy.map { |r| r["enqueued_at"] }.min
end

# Also the most jobs one greedy tenant had running at once (at most the slot limit with slots).
def greedy_line(mode, records, plain_greedy)
  total = greedy_total(records)
  return format("%-17s greedy total -", mode) unless total

  vs_plain = plain_greedy ? format(" (%.2fx plain)", total / plain_greedy) : ""
  peak = records.select { |r| greedy?(r["tenant"]) }.group_by { |r| r["tenant"] }.values.map do |rs|
    Demo::Report.peak_concurrency(rs.map { |r| [r["started_at"], r["finished_at"]] })
  end.max
  format("%-17s greedy total %.2fs%s, at most %d running at once per greedy tenant", mode, total, vs_plain, peak)
end

def jain_line(mode, records)
  tp = Demo::Report.backlogged_throughputs(records, %w[greedy-a greedy-b])
  return format("%-17s Jain's index: the greedy tenants were never backlogged together", mode) unless tp

  format("%-17s greedy-a %.0f jobs/s, greedy-b %.0f jobs/s while both backlogged: Jain's index %.3f",
         mode, tp["greedy-a"], tp["greedy-b"], Demo::Report.jain(tp.values))
end

def gnuplot_terminal
  terminals = IO.popen(["gnuplot", "-e", "set terminal"], err: %i[child out], &:read)
  terminals.match?(/^\s*pngcairo\s/) ? "pngcairo size 1000,600" : "png size 1000,600"
end

# One gnuplot data block per (mode, tenant class): x = enqueue time, y = wait. Returns the series titles.
def write_chart_data(results, data)
  titles = []
  File.open(data, "w") do |f|
    results.each do |mode, records|
      t0 = records.map { |r| r["enqueued_at"] }.min
      records.group_by { |r| greedy?(r["tenant"]) ? "greedy" : "small" }.sort.each do |klass, rs|
        f.puts "# #{mode} #{klass}"
        rs.each { |r| f.puts format("%.4f %.5f", r["enqueued_at"] - t0, [waits([r]).first, 1e-3].max) }
        f.puts "\n\n"
        titles << "#{mode} #{klass}"
      end
    end
  end
  titles
end

def gnuplot_script(data, titles, png, svg)
  plot = titles.each_with_index.map do |title, i|
    style = title.end_with?("small") ? "pt 7 ps 1.0" : "pt 1 ps 0.4"
    "'#{data}' index #{i} with points #{style} title '#{title}'"
  end
  <<~GP
    set title "Wait before a job starts, by enqueue time"
    set xlabel "enqueue time (s since the first enqueue)"
    set ylabel "wait (s, log scale)"
    set logscale y
    set key outside right noenhanced
    set grid
    set terminal #{gnuplot_terminal}
    set output "#{png}"
    plot #{plot.join(", \\\n     ")}
    set terminal svg size 1000,600
    set output "#{svg}"
    replot
  GP
end

def chart(results, out)
  unless system("command -v gnuplot >/dev/null 2>&1")
    puts "chart: gnuplot not found (bin/setup installs gnuplot-nox); no chart written"
    return
  end
  data = File.join(out, "wait.dat")
  png = File.join(out, "wait.png")
  svg = File.join(out, "wait.svg")
  File.write(File.join(out, "wait.gp"), gnuplot_script(data, write_chart_data(results, data), png, svg))
  if system("gnuplot", File.join(out, "wait.gp"))
    puts "chart: #{png}", "chart: #{svg}"
  else
    puts "chart: gnuplot failed; script and data left in #{out}"
  end
end

$sidekiq_pids = [] # rubocop:disable Style/GlobalVars
%w[INT TERM].each { |sig| trap(sig) { raise Interrupt } }
FileUtils.mkdir_p(options[:out])
s = options[:job_ms] / 1000.0
ideal = Demo::Report.ideal_wait(threads: options[:threads], greedy_s: s, small_tenants: options[:small_tenants],
                                per_tenant: SMALL_JOBS_PER_TENANT, small_s: s)
results = {}
begin
  (options[:modes] & MODES).each { |mode| results[mode] = run_mode(mode, options) }
rescue Interrupt
  warn "\ninterrupted; stopping Sidekiq"
  exit 130
ensure
  stop_sidekiqs
end

o = options
puts "Sidekiq #{$sidekiq_version} server processes, Ruby #{RUBY_VERSION}" # rubocop:disable Style/GlobalVars
puts format("scenario %s: %d greedy jobs, %d small tenants x %d jobs, %g ms jobs, %d threads, seed %d, " \
            "fair_tenant threshold %d/60s, slot limit %d per tenant (lease %ds)", o[:scenario], o[:jobs],
            o[:small_tenants], SMALL_JOBS_PER_TENANT, o[:job_ms], o[:threads], o[:seed], Demo::THROTTLE_THRESHOLD,
            Demo::SLOT_LIMIT, Demo::SLOT_LEASE)
m = SMALL_JOBS_PER_TENANT
k = o[:small_tenants]
puts format("ideal small-tenant wait %.3fs = R %.3f + max(m*s*(K+1)/W %.3f, sqrt(2*B*S/W) %.3f)", ideal, s,
            m * s * (k + 1) / o[:threads], Math.sqrt(2 * k * m * s * s / o[:threads]))
plain_greedy = results["plain"] && greedy_total(results["plain"])
results.each { |mode, records| puts mode_report(mode, records, ideal, plain_greedy, o) }
chart(results, o[:out]) if results.any?
