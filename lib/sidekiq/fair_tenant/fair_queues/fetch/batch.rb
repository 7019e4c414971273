# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # Threads of one fetcher that want a job at the same moment are served by one fetch call. A thread that
        # finds no call under way makes one, for itself and for every thread queued behind it (at most MAX); a
        # thread that arrives while a call is under way queues, and when that call ends the first of the queue
        # makes the next for all that queued meanwhile. So nothing waits for a batch to fill: at low load each
        # call serves one thread, at saturation as many as wait.
        #
        # A thread that leaves while it waits (Sidekiq::Shutdown raised into it, a TERM's hard stop) gives its
        # job back: the call that serves it, or the thread itself if the job was already there, puts the job back
        # at the front of its tenant (`requeue`), never nowhere. A failed call's error is raised in every thread
        # it was made for. (A job a call wrote into the in-flight list and handed to nobody, its reply lost, is
        # put back by the process's audit of its list, Audit.)
        class Batch
          MAX = Native::Names::FETCH_BATCH
          # `names`: the thread's order of its queues; `woken`: it took a wake-up token. `unit`: the job handed to
          # it, or nil; `due`: when nothing was, the ms until a rate-capped tenant may start; `error`: the call's.
          # `turn`: signalled when a call served it or it became the first of the queue (each thread is woken only
          # for its own turn: a broadcast would wake every waiting thread after every call).
          Want = Struct.new(:names, :woken, :thread, :state, :unit, :due, :error, :turn)
          @sizes = Hash.new(0)
          @sizes_mutex = Mutex.new

          # How many calls of this process served how many threads ({size => calls}): what bin/bench prints.
          def self.sizes = @sizes_mutex.synchronize { @sizes.dup }

          def self.counted(size)
            @sizes_mutex.synchronize { @sizes[size] += 1 }
          end

          def initialize
            @mutex = Mutex.new
            @queued = []
            @calling = false
          end

          # The current thread's Want once a call served it (its unit nil when nothing was there). The block
          # makes one call for the Wants it is given and sets each one's unit (or due).
          def take(names, woken, &call)
            want = Want.new(names, woken, Thread.current, :queued, nil, nil, nil, ConditionVariable.new)
            @mutex.synchronize { @queued << want }
            while (wants = lead_or_wait(want))
              lead(wants, &call)
            end
            raise want.error if want.error

            want.state = :delivered
            want
          ensure
            give_up(want) if want && want.state != :delivered
          end

          private

          # Waits while a call is under way or another thread is ahead in the queue, unless a call served this
          # want; returns the wants of the next call when this thread makes it (the first of the queue), nil once
          # a call served this want.
          def lead_or_wait(want)
            @mutex.synchronize do
              want.turn.wait(@mutex) while want.state != :done && (@calling || !@queued.first.equal?(want))
              return nil if want.state == :done

              @calling = true
              @queued.shift(MAX).each { |taken| taken.state = :taken }.tap { |taken| Batch.counted(taken.size) }
            end
          end

          # A failed call's error is every waiter's; the calling thread's own interruption (Sidekiq::Shutdown) is
          # its alone: a waiter it served nothing goes on as if nothing were there.
          def lead(wants)
            yield wants
          rescue StandardError => e
            wants.each { |want| want.error ||= e unless want.unit }
            raise
          ensure
            handed_out(wants)
          end

          # The call ended: its wants are served; a job served to a thread that left meanwhile goes back.
          def handed_out(wants)
            left = @mutex.synchronize do
              @calling = false
              gone = wants.select { |want| want.state == :gone }
              wants.each do |want|
                next if want.state == :gone

                want.state = :done
                want.turn.signal
              end
              @queued.first&.turn&.signal
              gone
            end
            left.each { |want| give_back(want.unit) }
          end

          # The thread leaves before its want was delivered: out of the queue, or its job back.
          def give_up(want)
            unit = @mutex.synchronize do
              @queued.delete_if { |queued| queued.equal?(want) } if want.state == :queued
              served = want.state == :done ? want.unit : nil
              want.state = :gone
              @queued.first&.turn&.signal unless @calling # (the next of the queue may be first now)
              served
            end
            give_back(unit)
          end

          def give_back(unit)
            unit&.requeue
          rescue StandardError => e
            ::Sidekiq.logger.warn(Printable.log("could not put back a job fetched for a stopping thread " \
                                                "(the in-flight audit or a recovery will): #{e.message}"))
          end
        end
      end
    end
  end
end
