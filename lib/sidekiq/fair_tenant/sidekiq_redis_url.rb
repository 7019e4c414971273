# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Reads the URL of the Redis server Sidekiq itself is configured with (6.x redis-rb
    # connections, 7.x/8.x redis-client connections), password included.
    module SidekiqRedisUrl
      module_function

      # Sidekiq 7+ builds its own pool once, on first use, from the settings given so far: asking
      # for it here could fix it before the app's `config.redis = ...` runs. A throwaway pool of
      # one client, which never connects, reads the same settings instead. 6.x rebuilds its pool
      # on `Sidekiq.redis =`, so its own pool is fine to read.
      def detect
        if Sidekiq.respond_to?(:default_configuration)
          pool = Sidekiq.default_configuration.new_redis_pool(1, "fair_tenant-url")
          begin
            pool.with { |conn| from_connection(conn) }
          ensure
            pool.shutdown { |conn| conn.close if conn.respond_to?(:close) }
          end
        else
          Sidekiq.redis_pool.with { |conn| from_connection(conn) }
        end
      rescue StandardError
        nil
      end

      def from_connection(conn)
        # redis-rb (6.x) connections answer `config` with the CONFIG command: ask their client.
        config = defined?(::Redis) && conn.is_a?(::Redis) ? conn._client : conn.config
        auth = userinfo(config)
        path = config.respond_to?(:path) ? config.path : nil
        return "unix://#{auth}#{path}?db=#{config.db}" if path

        "#{scheme(config)}://#{auth}#{host(config)}:#{config.port}/#{config.db}"
      end

      # redis-client keeps an IPv6 address without its brackets; a URL needs them back.
      def host(config)
        host = config.host.to_s
        host.include?(":") && !host.start_with?("[") ? "[#{host}]" : host
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
