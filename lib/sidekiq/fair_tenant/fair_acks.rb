# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # Acknowledgements ride along: a job that ran has its in-flight entry dropped by the next fetch script
      # call of any thread of the process, so a job costs one round trip (its fetch). A thread that blocks
      # without calling the script first, and shutdown (`bulk_requeue`), send them on their own. A SIGKILL
      # between a job's end and the next fetch leaves its entry: the job runs again (at least once).
      module Acks
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
        end

        def take_acks
          @acks_mutex.synchronize { @acks.slice!(0..) }
        end
      end
    end
  end
end
