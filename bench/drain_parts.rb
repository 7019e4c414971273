# frozen_string_literal: true

# Where a drain's `sidekiq` spends its CPU, by fetch (issue 31: why FairFetch drains at ~0.6x BasicFetch's pace). A
# real `sidekiq -c 10` drains JOBS no-op jobs of 1 KB over 50 tenants (bench/drain.rb's round, a private redis-server
# each) with BasicFetch, the minimal reliable fetch (bench/reliable_fetch.rb), FairFetch, and FairFetch without
# batching (bench/unbatched_fetch.rb), ROUNDS rounds taking turns; its methods' thread CPU is clocked inside it
# (bench/method_clock.rb). Printed per job: jobs/s, Redis and `sidekiq` CPU, thread switches, the threads a fetch call
# served, and each clocked method's calls and CPU µs (nested inclusive; a clock costs ~1-2 µs a call itself).
#
#   bundle exec ruby bench/drain_parts.rb
#   ROUNDS=3 JOBS=20000 BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/drain_parts.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"
require_relative "../spec/support/redis_server"
require_relative "../spec/support/sidekiq_process"
require_relative "drain"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

# The rounds and the table.
module DrainParts
  ROUNDS = Integer(ENV.fetch("ROUNDS", "2"))
  JOBS = Integer(ENV.fetch("JOBS", "10000"))
  MODES = %i[basic reliable fair unbatched].freeze

  module_function

  def run
    DrainBench.extra_env = { "BENCH_PARTS" => "1" }
    rounds = Hash.new { |h, k| h[k] = [] }
    ROUNDS.times { |r| MODES.rotate(r).each { |mode| rounds[mode] << DrainBench.round(mode, 1_000, JOBS, 50) } }
    rounds
  end

  FIGURES = { "jobs/s" => :rate, "Redis CPU us" => :cpu_us, "sidekiq CPU us" => :sidekiq_cpu_us,
              "thread switches" => :switches, "threads a fetch call" => :batch_mean }.freeze

  def print(rounds)
    puts "drain parts: sidekiq -c 10, #{JOBS} jobs of 1 KB over 50 tenants, #{ROUNDS} rounds a mode, " \
         "Sidekiq #{Sidekiq::VERSION}; per job (medians of the rounds):"
    puts row("", MODES.map(&:to_s))
    FIGURES.each { |name, key| puts row(name, MODES.map { |mode| figure(rounds[mode], key) }) }
    print_parts(rounds)
  end

  def print_parts(rounds)
    puts "  clocked methods, thread CPU us per job (calls per job):"
    labels = MODES.flat_map { |mode| rounds[mode].flat_map { |x| x[:parts].keys } }.uniq.sort
    labels.each { |label| puts row(label.sub(/\A\d+ /, ""), MODES.map { |mode| part(rounds[mode], label) }) }
  end

  def figure(rounds, key) = format("%.1f", DrainBench.median(rounds.map { |x| x[key] }))

  def part(rounds, label)
    found = rounds.filter_map { |x| x[:parts][label] }
    return "-" if found.empty?

    calls, us = found.transpose.map(&:sum)
    jobs = JOBS * found.size
    format("%<us>.1f (%<calls>.2f)", us: us / jobs, calls: calls.fdiv(jobs))
  end

  def row(name, cells) = "  #{name.ljust(62)} #{cells.map { |c| c.rjust(14) }.join}"
end

DrainParts.print(DrainParts.run)
