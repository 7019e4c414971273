# frozen_string_literal: true

# Several concurrency scopes' cost (issue 32 item 6): fetch + acknowledge, in-process FairFetch, per job: round
# trips, Redis commands (those inside scripts included) and server us (FCALL usec), with every job under no scope,
# one (its tenant's, limit 2), two or four (the others `key:` scopes shared by every tenant, limits that never
# bind), at 10 and 1,000 backlogged tenants. One job in flight at a time: no scope binds, so the rows differ by
# what each scope costs the fetch (its checks, its holder) and the acknowledgement (its release). Jobs are pushed
# through the client middleware, as an app pushes them. bin/bench runs it after bench/rate_cost.rb; alone:
#
#   bundle exec ruby bench/scope_cost.rb      (SCOPE_FETCHES: jobs per row, default 2000; SCOPE_TENANTS: 10,1000)
module ScopeCostBench
  QUEUE = "scope_bench"
  FETCHES = Integer(ENV.fetch("SCOPE_FETCHES", "2000"))
  TENANTS = ENV.fetch("SCOPE_TENANTS", "10,1000").split(",").map { |n| Integer(n) }
  SCOPES = [0, 1, 2, 4].freeze
  TENANT_SCOPE = { limit: 2, lease: 60 }.freeze
  # Key scopes past the first: every tenant's jobs share each, never full.
  KEYS = %i[api_a api_b api_c].freeze
  BIG = 1_000_000

  # The bench's job classes by their number of scopes.
  module Keys
    KEYS.each { |key| define_method(key) { |*| "scope-bench-#{key}" } }
  end

  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

  # { scopes => job class }, made once Sidekiq is loaded.
  def classes
    @classes ||= SCOPES.to_h do |count|
      options = { queue: QUEUE, retry: false }
      if count.positive?
        keyed = KEYS.first(count - 1).map { |key| { limit: BIG, lease: 60, key: key } }
        options[:fair_tenant_concurrency] = [TENANT_SCOPE, *keyed]
      end
      klass = Class.new do
        include Sidekiq::Worker
        extend Keys
        sidekiq_options(options)
      end
      [count, const_set("ScopeBench#{count}Job", klass)]
    end
  end

  # { [scopes, tenants] => { round_trips:, commands:, server_us: } }
  def run
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [QUEUE] }
    TENANTS.product(SCOPES).to_h do |tenants, count|
      redis.flushdb
      fill(classes.fetch(count), tenants, [tenants, FETCHES].max + FETCHES + 10)
      [[count, tenants], cost]
    end
  end

  # Each scope past the first: its extra commands and server us per job, at the fewest tenants.
  def per_scope(figures)
    tenants = TENANTS.first
    one = figures.fetch([1, tenants])
    four = figures.fetch([4, tenants])
    { commands: (four[:commands] - one[:commands]) / 3, server_us: (four[:server_us] - one[:server_us]) / 3 }
  end

  def print(figures)
    puts
    puts "  concurrency scopes per job (#{QUEUE}, fair), in-process FairFetch, #{FETCHES} jobs per cell, one in " \
         "flight (no scope binds), fetch + acknowledge per job:"
    puts "  #{" " * 66} #{"round trips".rjust(12)} #{"Redis cmds".rjust(12)} #{"server us".rjust(10)}"
    figures.each do |(count, tenants), c|
      puts format("  %<name>-66s %<round_trips>12.2f %<commands>12.2f %<server_us>10.1f",
                  name: "#{tenants} tenants, #{scope_name(count)}", **c)
    end
    extra = per_scope(figures)
    puts format("  each scope past the first (4 scopes against 1, %<tenants>d tenants, / 3): %<commands>+.2f Redis " \
                "commands, %<us>+.1f server us per job", tenants: TENANTS.first, commands: extra[:commands],
                                                         us: extra[:server_us])
  end

  def scope_name(count)
    case count
    when 0 then "no scope"
    when 1 then "1 scope: the tenant's (limit 2)"
    else "#{count} scopes: the tenant's + #{count - 1} key scope#{"s" if count > 2} (never full)"
    end
  end

  def fill(klass, tenants, jobs)
    (0...jobs).each_slice(1000) do |slice|
      slice.group_by { |i| i % tenants }.each do |tenant, is|
        Sidekiq::Client.push_bulk("class" => klass, "args" => is.map { |i| [i] }, "fair_tenant" => "t#{tenant}")
      end
    end
  end

  def cost
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    fetch.retrieve_work.acknowledge
    Sidekiq::FairTenant::Concurrency::Slots.stop # its heartbeat's commands are not per job
    before = stats
    FETCHES.times { fetch.retrieve_work.acknowledge }
    after = stats
    fetch.flush_acks
    scripts = %w[calls usec].to_h { |f| [f, script_stat(after, f) - script_stat(before, f)] }
    { round_trips: scripts["calls"].fdiv(FETCHES), commands: (calls(after) - calls(before)).fdiv(FETCHES),
      server_us: scripts["usec"].fdiv(FETCHES) }
  end

  def calls(stats) = stats.sum { |cmd, v| cmd == "info" ? 0 : v["calls"].to_i }
  def script_stat(stats, field) = %w[fcall evalsha].sum { |c| stats.dig(c, field).to_i }

  def stats
    redis.info("commandstats").transform_keys { |cmd| cmd.delete_prefix("cmdstat_") }
  end
end

if $PROGRAM_NAME == __FILE__
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "json"
  require "logger"
  require_relative "../spec/support/redis_server"
  server = RedisServer.new.start
  ENV["REDIS_URL"] = server.url
  require "sidekiq"
  require "sidekiq/fair_tenant"
  Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
  Sidekiq.logger.level = Logger::WARN
  Sidekiq.configure_client do |c|
    c.redis = { url: server.url, size: 5 }
    c.client_middleware { |chain| chain.add(Sidekiq::FairTenant::ClientMiddleware) }
  end
  begin
    ScopeCostBench.print(ScopeCostBench.run)
    require_relative "plain_scope_cost"
    PlainScopeCostBench.print(PlainScopeCostBench.run)
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop
    server.stop
  end
end
