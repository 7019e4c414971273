# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Paces what the gem does now and then (a recovery sweep, an idle look, a liveness beat, a lease renewal, a
    # warning): #due? is true at most once per `seconds` of the monotonic clock, in one thread. Thread-safe.
    class Interval
      def self.now = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)

      def initialize(seconds)
        @seconds = seconds
        @next = 0.0
        @mutex = Mutex.new
      end

      # True when the interval has passed since the last true (or at once, the first time): the caller acts.
      def due?(now = Interval.now, every: @seconds)
        @mutex.synchronize do
          return false if now < @next

          @next = now + every
        end
        true
      end

      # Due again `seconds` from now at the latest.
      def within(seconds, now = Interval.now)
        at = now + seconds
        @mutex.synchronize { @next = at if at < @next }
      end

      # Due at once: the next #due? is true.
      def now! = @mutex.synchronize { @next = 0.0 }

      # Never due until #now! (specs that act by hand).
      def never! = @mutex.synchronize { @next = Float::INFINITY }
    end
  end
end
