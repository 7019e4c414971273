# frozen_string_literal: true

# Loaded by the `sidekiq` processes of bin/bench's drain table (bench/drain.rb), and by the bench itself.
# BENCH_FETCH=reliable, BENCH_PARTS and BENCH_UNBATCHED (the drain's `sidekiq` only) add a fetch to compare with,
# the methods' CPU clocks, and FairFetch without batching (bench/drain_parts.rb).
require_relative "perform_app"
require_relative "reliable_fetch"
require_relative "method_clock" if ENV["BENCH_PARTS"]
require_relative "unbatched_fetch" if ENV["BENCH_UNBATCHED"]

# A no-op job (one INCR) carrying its tenant and a filler as arguments: args [index, tenant, filler].
class BenchDrainJob < BenchNoopJob
  def self.fair_tenant(_index, tenant, *) = tenant
end

# The sizes of this process's fetch calls (threads served a call), left in Redis when it stops for bin/bench.
Sidekiq.configure_server do |config|
  config.on(:shutdown) do
    sizes = Sidekiq::FairTenant::FairFetch::Batch.sizes
    Sidekiq.redis { |conn| sizes.each { |size, calls| conn.call("HINCRBY", "bench:batches", size, calls) } }
  end
end
