# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Sidekiq's own connection for the explicit APIs (runtime limits, slot stats), raising this gem's errors:
    # ConnectionError (TimeoutError) when Redis is unreachable, CommandError when it refuses a call, whatever
    # Sidekiq's client (redis-rb 4.8 on 6.x, redis-client on 7.x/8.x), and no password in the message.
    module SidekiqRedis
      TIMEOUTS = [(::Redis::TimeoutError if defined?(::Redis::TimeoutError)),
                  (::RedisClient::TimeoutError if defined?(::RedisClient::TimeoutError))].compact.freeze
      CONNECTION = [(::Redis::BaseConnectionError if defined?(::Redis::BaseConnectionError)),
                    (::RedisClient::ConnectionError if defined?(::RedisClient::ConnectionError))].compact.freeze
      COMMAND = [(::Redis::BaseError if defined?(::Redis::BaseError)),
                 (::RedisClient::Error if defined?(::RedisClient::Error))].compact.freeze

      module_function

      def with(&block)
        Sidekiq.redis(&block)
      rescue *TIMEOUTS => e
        raise TimeoutError, message(e)
      rescue *CONNECTION => e
        raise ConnectionError, message(e)
      rescue *COMMAND => e
        raise CommandError, message(e)
      end

      def message(error)
        "#{error.message.gsub(%r{//[^/@\s]*@}, "//")} (#{error.class})"
      end
    end
  end
end
