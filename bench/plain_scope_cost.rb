# frozen_string_literal: true

# The classes of bench/scope_cost.rb (loaded first): their jobs on a queue that is not fair, through the server
# middleware in this thread: acquire, the job, release per job (a job of one scope's release rides with the
# thread's next acquire; one of several sends its own, release_all.lua). Printed after ScopeCostBench's table
# (bin/bench, and scope_cost.rb alone).
module PlainScopeCostBench
  QUEUE = "scope_bench_plain"

  module_function

  # { scopes => { round_trips:, commands:, server_us: } } per job.
  def run
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    ScopeCostBench::SCOPES.drop(1).to_h do |count|
      ScopeCostBench.redis.flushdb
      [count, cost(ScopeCostBench.classes.fetch(count))]
    end
  ensure
    Sidekiq::FairTenant::Concurrency::Releases.reset!
  end

  def cost(klass)
    Sidekiq::FairTenant::Concurrency::Releases.reset!
    jobs = Array.new(ScopeCostBench::FETCHES + 1) { |i| job(klass, i) }
    perform(klass, jobs.shift)
    before = ScopeCostBench.stats
    jobs.each { |job| perform(klass, job) }
    Sidekiq::FairTenant::Concurrency::Releases.flush # the last job's kept release
    after = ScopeCostBench.stats
    Sidekiq::FairTenant::Concurrency::Slots.stop
    per_job(before, after)
  end

  def per_job(before, after)
    bench = ScopeCostBench
    scripts = %w[calls usec].to_h { |f| [f, bench.script_stat(after, f) - bench.script_stat(before, f)] }
    { round_trips: scripts["calls"].fdiv(bench::FETCHES),
      commands: (bench.calls(after) - bench.calls(before)).fdiv(bench::FETCHES),
      server_us: scripts["usec"].fdiv(bench::FETCHES) }
  end

  def perform(klass, job)
    Sidekiq::FairTenant::ServerMiddleware.new.call(klass.new, job, QUEUE) { nil }
  end

  def job(klass, index)
    klass.get_sidekiq_options.merge("class" => klass.name, "queue" => QUEUE, "args" => [index],
                                    "jid" => format("%024x", index), "fair_tenant" => "t#{index % 10}",
                                    "enqueued_at" => Time.now.to_f)
  end

  def print(figures)
    puts
    puts "  the same on a queue that is not fair (#{QUEUE}), the server middleware in one thread, " \
         "#{ScopeCostBench::FETCHES} jobs per row, acquire + release per job:"
    figures.each do |count, c|
      puts format("  %<name>-66s %<round_trips>12.2f %<commands>12.2f %<server_us>10.1f",
                  name: "10 tenants, #{ScopeCostBench.scope_name(count)}", **c)
    end
  end
end
