# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Reads the URL of the Redis server Sidekiq itself is configured with (6.x redis-rb
    # connections, 7.x/8.x redis-client connections), password included.
    module SidekiqRedisUrl
      module_function

      def detect
        pool = if Sidekiq.respond_to?(:default_configuration)
                 Sidekiq.default_configuration.redis_pool
               else
                 Sidekiq.redis_pool
               end
        pool.with { |conn| from_connection(conn) }
      rescue StandardError
        nil
      end

      def from_connection(conn)
        config = conn.respond_to?(:config) ? conn.config : conn._client
        auth = userinfo(config)
        path = config.respond_to?(:path) ? config.path : nil
        return "unix://#{auth}#{path}?db=#{config.db}" if path

        "#{scheme(config)}://#{auth}#{config.host}:#{config.port}/#{config.db}"
      end

      def scheme(config)
        return config.scheme if config.respond_to?(:scheme) && config.scheme

        config.respond_to?(:ssl) && config.ssl ? "rediss" : "redis"
      end

      def userinfo(config)
        password = config.respond_to?(:password) ? config.password : nil
        return "" unless password

        user = config.respond_to?(:username) ? config.username : nil
        "#{user && user != "default" ? escape(user) : ""}:#{escape(password)}@"
      end

      def escape(part)
        URI.encode_www_form_component(part.to_s)
      end
    end
  end
end
