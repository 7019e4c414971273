# frozen_string_literal: true

# Issue 31 item 2 (a lean turn), the first step: what a fair fetch spends its Redis time on, command by command.
# On a redis-server of its own, JOBS jobs of JOB_BYTES bytes over TENANTS tenants are pushed to a fair queue
# (and, in turn, to a plain one), then fetched and acknowledged one at a time by FairFetch (and by Sidekiq's
# BasicFetch, BRPOP), as one busy thread does. For each command Redis ran (inside scripts included), INFO
# commandstats gives its calls and server µs: printed per job, with its share of the fair fetch's time. Calls
# are exact; µs vary with the machine's load (compare shares, not absolutes).
#
#   bundle exec ruby bench/fetch_anatomy.rb
#   ANATOMY_JOBS=20000 ANATOMY_TENANTS=10000 ANATOMY_BYTES=200000 bundle exec ruby bench/fetch_anatomy.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/fetch_anatomy.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
require "sidekiq"
require "sidekiq/api"
require "sidekiq/fetch"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 5 } }
Sidekiq::FairTenant.configure do |c|
  c.redis_url = server.url
  c.fair_queues = %w[anatomy_fair]
end

# The job of both queues: the tenant is its first argument.
class AnatomyJob
  include Sidekiq::Worker

  sidekiq_options queue: "anatomy_plain"

  def self.fair_tenant(tenant, *) = tenant
end

# Fetch and acknowledge of each queue, per job, by command.
module FetchAnatomy
  JOBS = Integer(ENV.fetch("ANATOMY_JOBS", "5000"))
  TENANTS = Integer(ENV.fetch("ANATOMY_TENANTS", "50"))
  BYTES = Integer(ENV.fetch("ANATOMY_BYTES", "1024"))
  IDENTITY = "anatomy-host:1:a"

  module_function

  def stats(redis)
    redis.info("commandstats").to_h do |cmd, v|
      [cmd.delete_prefix("cmdstat_"), [v.fetch("calls").to_i, v.fetch("usec").to_i]]
    end
  end

  def since(redis, before)
    stats(redis).filter_map do |cmd, (calls, usec)|
      was_calls, was_usec = before.fetch(cmd, [0, 0])
      next if cmd == "info" || calls == was_calls

      [cmd, [calls - was_calls, usec - was_usec]]
    end.to_h
  end

  def push(queue)
    pad = "x" * BYTES
    JOBS.times.each_slice(1000) do |slice|
      args = slice.map { |i| ["t#{i % TENANTS}", i, pad] }
      Sidekiq::Client.push_bulk("class" => AnatomyJob, "queue" => queue, "args" => args)
    end
  end

  def drain(fetch)
    done = 0
    while done < JOBS
      unit = fetch.retrieve_work or next
      unit.acknowledge
      done += 1
    end
    fetch.flush_acks if fetch.respond_to?(:flush_acks)
  end

  def fetcher(queue)
    if queue == "anatomy_fair"
      Sidekiq::FairTenant::FairFetch.new({ queues: [queue] }, IDENTITY).tap do
        Sidekiq::FairTenant::Concurrency::Slots.stop
      end
    elsif Sidekiq::VERSION.to_i >= 7
      Sidekiq::BasicFetch.new(Sidekiq.default_configuration.default_capsule.tap { |c| c.queues = [queue] })
    else
      Sidekiq::BasicFetch.new(queues: [queue])
    end
  end

  def measure(redis, queue)
    redis.flushall
    push(queue)
    fetch = fetcher(queue)
    before = stats(redis)
    drain(fetch)
    since(redis, before)
  end

  OUTER = %w[fcall evalsha eval].freeze

  # The time of a script call (FCALL, EVALSHA) includes what the commands it ran took: those are shown as
  # their share of it, and the rest is the script's own (Lua, the call, the reply).
  def report(name, counted, total_us)
    puts "\n  #{name}: per job, by command (those run inside scripts included)"
    puts row("command", "calls", "µs", "share")
    nested = counted.except(*OUTER)
    rows(nested, total_us, counted.keys.intersect?(OUTER)).each do |cmd, (calls, usec)|
      puts row(cmd, per_job(calls), per_job(usec), "#{(100.0 * usec / total_us).round(1)}%")
    end
    counted.slice(*OUTER).each { |cmd, (calls, _)| puts row("#{cmd} (calls)", per_job(calls), "", "") }
    puts row("all", per_job(nested.values.sum(&:first)), per_job(total_us), "")
  end

  def rows(nested, total_us, scripted)
    rows = nested.sort_by { |_, (_, usec)| -usec }
    rows << ["(the scripts' own: Lua)", [0, total_us - nested.values.sum(&:last)]] if scripted
    rows
  end

  def per_job(value) = value.fdiv(JOBS).round(2).to_s
  def row(*cells) = "  #{cells[0].ljust(24)} #{cells[1..].map { |c| c.rjust(9) }.join(" ")}"

  # Server µs of what the clients sent (a script call's own time includes its commands').
  def total(counted)
    outer = counted.slice(*OUTER)
    return counted.values.sum(&:last) if outer.empty?

    outer.values.sum(&:last) + counted.except(*OUTER).reject { |cmd, _| inside?(cmd) }.values.sum(&:last)
  end

  # Commands a fair fetch only runs inside its scripts (an acknowledgement's plain LREM is sent by the client).
  def inside?(cmd) = !%w[lrem brpop rpop].include?(cmd)

  def run(redis)
    puts "fetch anatomy: #{JOBS} jobs of #{BYTES} B over #{TENANTS} tenants, one thread fetching and " \
         "acknowledging, Sidekiq #{Sidekiq::VERSION}"
    plain = measure(redis, "anatomy_plain")
    fair = measure(redis, "anatomy_fair")
    plain_us = total(plain)
    fair_us = total(fair)
    report("BasicFetch", plain, plain_us)
    report("FairFetch", fair, fair_us)
    fair_calls = fair.except(*OUTER).values.sum(&:first)
    puts "\n  FairFetch / BasicFetch: #{fair_us.fdiv(plain_us).round(2)}x the server µs per job, " \
         "#{fair_calls.fdiv(plain.values.sum(&:first)).round(2)}x the commands per job"
  end
end

begin
  FetchAnatomy.run(Redis.new(url: server.url))
ensure
  server.stop
end
