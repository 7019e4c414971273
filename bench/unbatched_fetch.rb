# frozen_string_literal: true

# bench/drain_parts.rb's third mode: FairFetch without batching. Each thread makes its own fetch call for itself
# alone, several calls in flight at once (as BasicFetch's BRPOPs are), instead of queueing behind the call under way
# to be served by the next one. Loaded by bench/drain_app.rb when BENCH_UNBATCHED is set; never in the gem.
module BenchUnbatched
  def take(names, woken, &call)
    want = self.class::Want.new(names, woken, Thread.current, :taken)
    self.class.counted(1)
    call.call([want])
    want.state = :delivered
    want
  end
end
Sidekiq::FairTenant::FairFetch::Batch.prepend(BenchUnbatched)
