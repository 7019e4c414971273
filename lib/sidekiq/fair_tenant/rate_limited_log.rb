# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Logs a warning at most once per `interval` seconds per key, so a failing Redis or a
    # misconfigured class produces one line a minute, not one per push.
    class RateLimitedLog
      def initialize(interval: 60)
        @interval = interval
        @paces = {}
        @suppressed = Hash.new(0)
        @mutex = Mutex.new
      end

      # Yields the message only when it will be logged.
      def warn(key, logger)
        suppressed = @mutex.synchronize do
          @paces.shift if @paces.size >= 1_000 && !@paces.key?(key)
          unless (@paces[key] ||= Interval.new(@interval)).due?
            @suppressed[key] += 1
            return false
          end
          @suppressed.delete(key) || 0
        end
        message = yield
        message += " (#{suppressed} similar warnings suppressed)" if suppressed.positive?
        logger.warn(Printable.log(message))
        true
      end

      def reset
        @mutex.synchronize do
          @paces.clear
          @suppressed.clear
        end
      end
    end
  end
end
