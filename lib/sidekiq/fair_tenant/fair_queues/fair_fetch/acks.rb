# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # Acknowledgements ride along: a job that ran has its in-flight entry dropped by the next fetch script
      # call of any thread of the process, so a job costs one round trip (its fetch). A thread that blocks
      # without calling the script first, shutdown (`bulk_requeue`, which Sidekiq 8.1.3+ calls only on a hard
      # shutdown) and the process's exit send them on their own. A SIGKILL between a job's end and the next
      # fetch leaves its entry: the job runs again (at least once). Acknowledgements leave memory only once a
      # call that carried them returned: a failed, refused or interrupted call (a failover's READONLY, a
      # timeout, Sidekiq::Shutdown) keeps them for the next (dropping an entry twice is harmless). A long entry
      # (over INLINE_MAX_BYTES) of a job that took no slot is not carried into the fetch script but dropped by a
      # plain LREM right after it: a string crossing into Lua costs Redis time in proportion to its length.
      #
      # Pending acknowledgements belong to the in-flight list, not to a fetcher object: every fetcher of the
      # process fetching into the same list shares them. (Sidekiq 7.x/8.x build a capsule's fetcher lazily, in
      # whichever processor thread asks first, without a lock: at startup several threads may each build one
      # and then all use the one memoised last; a job fetched through another must still be acknowledged.)
      module Acks
        ATTEMPTS_AT_EXIT = 3
        INLINE_MAX_BYTES = Native::Names::INLINE_ACK_MAX_BYTES
        Pending = Struct.new(:list, :mutex, :plain, :timing)
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
              @pending[fetcher.inflight_key] ||= Pending.new([], Mutex.new, {}.compare_by_identity,
                                                             {}.compare_by_identity)
            end
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
                ::Sidekiq.logger.warn("[sidekiq-fair_tenant] could not acknowledge finished jobs at exit: " \
                                      "#{e.message}")
              end
            end
          end
        end

        # `slotless`: the job took no concurrency slot, so a long entry of it may go by a plain LREM. `timing`:
        # under a queue fair by worker time, its charge and measured run time (FairUnit), sent with the entry
        # (or alone, for a plain LREM's).
        def acknowledged(entry, slotless: false, timing: nil)
          @acks.mutex.synchronize do
            @acks.list << entry
            @acks.plain[entry] = true if slotless && entry.bytesize > INLINE_MAX_BYTES
            @acks.timing[entry] = timing if timing
          end
        end

        def flush_acks(conn = nil)
          entries = pending_acks
          return if entries.empty?

          timings = @acks.mutex.synchronize { @acks.timing.dup }
          finish("ack", entries.flat_map { |entry| [entry, timings[entry] || ""] }, conn)
          acks_applied(entries)
        end

        private

        # One call of the ack script ("ack" or "requeue").
        def finish_call(conn, mode, entries)
          FairQueues.run(conn, "ack", [*@keys.first(3), Recovery::SUSPECTS, "dead", @keys.last],
                         [mode, Native::Fair.base_template, FairQueues::TOKEN_CAP, @identity, "0", Recovery::KEEP,
                          *entries])
        end

        def init_acks
          @acks = Acks.track(self)
        end

        def pending_acks
          @acks.mutex.synchronize { @acks.list.dup }
        end

        # The pending acknowledgements: those the fetch script carries, the plain ones, and the script's
        # arguments for them (entry, timing pairs; a plain one's timing alone, entry "").
        def acks_for_fetch
          @acks.mutex.synchronize do
            carried, plain = @acks.list.partition { |entry| !@acks.plain.key?(entry) }
            args = carried.flat_map { |entry| [entry, @acks.timing[entry] || ""] }
            plain.each { |entry| args.push("", @acks.timing[entry]) if @acks.timing.key?(entry) }
            [carried, plain, args]
          end
        end

        # After a fetch script call returned (the process registered): the plain ones dropped by LREMs in one
        # round trip (from the tail, as the script does), then all forgotten.
        def acks_fetched(conn, carried, plain)
          conn.pipelined { |pipe| plain.each { |entry| pipe.call("LREM", @keys.first, -1, entry) } } if plain.any?
          acks_applied(carried + plain)
        end

        # Forgets acknowledgements a call applied (by identity: another thread may have sent some too).
        def acks_applied(entries)
          return if entries.empty?

          sent = {}.compare_by_identity # (a plain Hash would copy the String keys)
          entries.each { |entry| sent[entry] = true }
          @acks.mutex.synchronize do
            @acks.list.reject! { |entry| sent.key?(entry) }
            entries.each do |entry|
              @acks.plain.delete(entry)
              @acks.timing.delete(entry)
            end
          end
        end
      end
    end
  end
end
