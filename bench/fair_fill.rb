# frozen_string_literal: true

require "json"

# bench/fair.rb's helpers that bench/longest.rb needs too (bench/longest_alone.rb runs it without the rest).
module FairBench
  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

  # `jobs` jobs of BenchFairJob in fair queue `name`, spread over `tenants` tenants, written as FairQueues::Push writes
  # them (enqueue time and jid first: JobBytes), pushed 1,000 per call.
  def fill(name, tenants, jobs)
    now = Time.now.to_f
    Sidekiq.redis do |conn|
      (0...jobs).each_slice(1000) do |slice|
        pairs = slice.map do |i|
          job = { "class" => "BenchFairJob", "queue" => name, "args" => [i], "jid" => i.to_s, "enqueued_at" => now }
          ["t#{i % tenants}", JSON.generate(Sidekiq::FairTenant::FairQueues::JobBytes.head_first(job))]
        end
        Sidekiq::FairTenant::FairQueues.push(conn, name, pairs)
      end
    end
  end
end
