# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # Acknowledgements ride along: a job that ran has its in-flight field dropped by the next fetch script
        # call of any thread of the process, so a job costs one round trip (its fetch). A field is short (queue,
        # tenant, id): the job's bytes never come back, whatever its size. A thread that blocks
        # without calling the script first, shutdown (`bulk_requeue`, which Sidekiq 8.1.3+ calls only on a hard
        # shutdown) and the process's exit send them on their own. A SIGKILL between a job's end and the next
        # fetch leaves its entry: the job runs again (at least once). Acknowledgements leave memory only once a
        # call that carried them returned: a failed, refused or interrupted call (a failover's READONLY, a
        # timeout, Sidekiq::Shutdown) keeps them for the next (dropping a field twice is harmless).
        #
        # Pending acknowledgements belong to the in-flight list, not to a fetcher object: every fetcher of the
        # process fetching into the same list shares them (each holds its list's Pending). (Sidekiq 7.x/8.x build
        # a capsule's fetcher lazily, in whichever processor thread asks first, without a lock: at startup several
        # threads may each build one and then all use the one memoised last; a job fetched through another must
        # still be acknowledged.)
        module Acks
          ATTEMPTS_AT_EXIT = 3
          # The acknowledgements pending on one in-flight list: `list` their fields, `timing` (under a queue fair by
          # worker time) their charge and measured run time (FairUnit), sent with the field.
          Pending = Struct.new(:list, :mutex, :timing) do
            def add(entry, timing)
              mutex.synchronize do
                list << entry
                self.timing[entry] = timing if timing
              end
            end

            def entries = mutex.synchronize { list.dup }

            # The script's arguments for `entries`: field, timing pairs.
            def args(entries)
              timings = mutex.synchronize { timing.dup }
              entries.flat_map { |entry| [entry, timings[entry] || ""] }
            end

            # The pending acknowledgements a fetch carries, and its arguments for them.
            def carried
              mutex.synchronize do
                carried = list.dup
                [carried, carried.flat_map { |entry| [entry, timing[entry] || ""] }]
              end
            end

            # Forgets acknowledgements a call applied (by identity: another thread may have sent some too).
            def applied(entries)
              return if entries.empty?

              sent = {}.compare_by_identity # (a plain Hash would copy the String keys)
              entries.each { |entry| sent[entry] = true }
              mutex.synchronize do
                list.reject! { |entry| sent.key?(entry) }
                entries.each { |entry| timing.delete(entry) }
              end
            end
          end
          @fetchers = []
          @pending = {}
          @mutex = Mutex.new

          class << self
            # Every fetcher of the process flushes its acknowledgements when the process exits. Returns the
            # pending acknowledgements of the fetcher's in-flight list (shared by every fetcher into it).
            def track(fetcher)
              @mutex.synchronize do
                at_exit { Acks.flush_all } if @fetchers.empty?
                @fetchers << fetcher
                @pending[fetcher.inflight_key] ||= Pending.new([], Mutex.new, {}.compare_by_identity)
              end
            end

            # The entries of the in-flight list `key` whose acknowledgement is pending (for the audit).
            def pending(key)
              acks = @mutex.synchronize { @pending[key] } or return []
              acks.entries
            end

            # At exit, a few attempts (a failover may be under way); what still fails runs again (at least once).
            def flush_all
              @mutex.synchronize { @fetchers.dup }.each do |fetcher|
                attempt = 0
                begin
                  fetcher.flush_acks
                rescue StandardError => e
                  attempt += 1
                  retry if attempt < ATTEMPTS_AT_EXIT && sleep(0.5)
                  ::Sidekiq.logger.warn(Printable.log("could not acknowledge finished jobs at exit: #{e.message}"))
                end
              end
            end
          end
        end
      end
    end
  end
end
