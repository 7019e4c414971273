# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # Acknowledgements ride along: a job that ran has its in-flight entry dropped by the next fetch script
      # call of any thread of the process, so a job costs one round trip (its fetch). A thread that blocks
      # without calling the script first, shutdown (`bulk_requeue`, which Sidekiq 8.1.3+ calls only on a hard
      # shutdown) and the process's exit send them on their own. A SIGKILL between a job's end and the next
      # fetch leaves its entry: the job runs again (at least once).
      module Acks
        @fetchers = []
        @mutex = Mutex.new

        # Every fetcher of the process flushes its acknowledgements when the process exits.
        def self.track(fetcher)
          @mutex.synchronize do
            at_exit { Acks.flush_all } if @fetchers.empty?
            @fetchers << fetcher
          end
        end

        def self.flush_all
          @mutex.synchronize { @fetchers.dup }.each do |fetcher|
            fetcher.flush_acks
          rescue StandardError => e
            ::Sidekiq.logger.warn("[sidekiq-fair_tenant] could not acknowledge finished jobs at exit: #{e.message}")
          end
        end

        def acknowledged(entry)
          @acks_mutex.synchronize { @acks << entry }
        end

        def flush_acks(conn = nil)
          entries = take_acks
          finish("ack", entries, conn) unless entries.empty?
        end

        private

        def init_acks
          @acks = []
          @acks_mutex = Mutex.new
          Acks.track(self)
        end

        def take_acks
          @acks_mutex.synchronize { @acks.slice!(0..) }
        end
      end
    end
  end
end
