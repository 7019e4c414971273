# frozen_string_literal: true

# Thread CPU time spent inside chosen methods of a running `sidekiq` (bench/drain_parts.rb): each wrapped method adds
# its calls and its own thread's CPU time (CLOCK_THREAD_CPUTIME_ID: time waiting for IO, a lock or the GVL is not
# counted) to a total, nested calls inclusive; the totals go to Redis (`bench:parts`) when the process stops.
# Labels begin with their order (bench/drain_parts.rb prints them in it). Loaded by bench/drain_app.rb when
# BENCH_PARTS is set. A wrapper costs about 1-2 µs a call itself: compare the modes, not the absolutes.
module MethodClock
  @totals = Hash.new { |h, k| h[k] = [0, 0.0] }
  @mutex = Mutex.new

  class << self
    def wrap(target, meth, label)
      clock = self
      target.prepend(Module.new do
        define_method(meth) do |*args, **kwargs, &block|
          started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
          begin
            super(*args, **kwargs, &block)
          ensure
            clock.add(label, Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started)
          end
        end
      end)
    end

    def add(label, seconds)
      @mutex.synchronize do
        total = @totals[label]
        total[0] += 1
        total[1] += seconds
      end
    end

    # {label => [calls, µs]}
    def totals = @mutex.synchronize { @totals.transform_values { |calls, s| [calls, s * 1e6] } }
  end
end

require "sidekiq/processor"
require "sidekiq/fetch"

fetch = Sidekiq::FairTenant::FairFetch
MethodClock.wrap(Sidekiq::Processor, :process, "01 process (the job: parse, middleware, perform, acknowledge)")
MethodClock.wrap(Sidekiq::Processor, :execute_job, "02   execute_job (perform: one INCR)")
MethodClock.wrap(Sidekiq::Processor, :fetch, "03 fetch (Processor#fetch)")
MethodClock.wrap(Sidekiq::BasicFetch, :retrieve_work, "04   BasicFetch#retrieve_work")
MethodClock.wrap(fetch, :retrieve_work, "05   FairFetch#retrieve_work")
MethodClock.wrap(fetch::Batch, :take, "06     Batch#take (waits included)")
MethodClock.wrap(fetch::Serving, :fetch_once, "07       Serving#fetch_once (one call, for every thread served)")
MethodClock.wrap(Sidekiq::FairTenant::ScriptRunner.singleton_class, :fcall, "08         ScriptRunner.fcall")
MethodClock.wrap(fetch::Reply.singleton_class, :read, "09         Reply.read")
MethodClock.wrap(fetch::FairUnit, :acknowledge, "10   FairUnit#acknowledge")

Sidekiq.configure_server do |config|
  config.on(:shutdown) do
    totals = MethodClock.totals
    Sidekiq.redis do |conn|
      totals.each { |label, (calls, us)| conn.call("HSET", "bench:parts", label, "#{calls} #{us}") }
    end
  end
end
