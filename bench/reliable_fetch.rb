# frozen_string_literal: true

# The drain table's third fetch: the least a reliable fetch does (what Sidekiq Pro's super_fetch does per job, without
# its recovery of dead processes' lists): the job is moved into a private in-flight list by the command that takes it
# (BLMOVE), and removed from it (LREM, the job's bytes sent back) once it ran. Two round trips a job, no fairness.
# Set as the fetch strategy of the drain's `sidekiq` when BENCH_FETCH=reliable (bench/drain_app.rb).
class BenchReliableFetch
  TIMEOUT = 2

  # A job taken into the in-flight list.
  UnitOfWork = Struct.new(:queue, :job, :fetch) do
    def acknowledge = fetch.redis { |conn| conn.call("LREM", fetch.inflight, -1, job) }
    def queue_name = queue.delete_prefix("queue:")

    def requeue
      fetch.redis do |conn|
        conn.call("RPUSH", queue, job)
        conn.call("LREM", fetch.inflight, -1, job)
      end
    end
  end

  attr_reader :inflight

  # Sidekiq 7.x/8.x pass a capsule, 6.4 its options Hash; the drain has one queue.
  def initialize(capsule_or_options)
    @capsule = capsule_or_options.respond_to?(:redis) ? capsule_or_options : nil
    names = @capsule ? @capsule.queues : capsule_or_options[:queues]
    @queue = "queue:#{names.first}"
    @inflight = "bench:inflight:#{Process.pid}"
  end

  def redis(&block) = @capsule ? @capsule.redis(&block) : Sidekiq.redis(&block)

  def retrieve_work
    job = redis do |conn|
      if conn.respond_to?(:blocking_call)
        conn.blocking_call(TIMEOUT + 1, "BLMOVE", @queue, @inflight, "RIGHT", "LEFT", TIMEOUT)
      else
        conn.blmove(@queue, @inflight, "RIGHT", "LEFT", timeout: TIMEOUT)
      end
    end
    job && UnitOfWork.new(@queue, job, self)
  end

  def bulk_requeue(inprogress, _options = nil) = inprogress.each(&:requeue)
end

if ENV["BENCH_FETCH"] == "reliable"
  Sidekiq.configure_server do |config|
    if config.respond_to?(:options) # 6.4: an instance
      config.options[:fetch] = BenchReliableFetch.new(config.options)
    else
      config[:fetch_class] = BenchReliableFetch
    end
  end
end
