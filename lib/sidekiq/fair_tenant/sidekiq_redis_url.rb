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
        with_connection { |conn| from_connection(conn) }
      end

      # Sidekiq's TLS settings (`ssl`, `ssl_params`) as the gem's config keys; {} without TLS.
      def tls
        with_connection { |conn| tls_from(conn) } || {}
      end

      # Sidekiq's Sentinel settings as the gem's keys, with the master's URL (its name as the host); nil
      # without Sentinel. Reads the settings only: resolving the master would ask the sentinels.
      def sentinel
        with_connection { |conn| sentinel_from(conn) }
      end

      def with_connection(&block)
        if Sidekiq.respond_to?(:default_configuration)
          pool = Sidekiq.default_configuration.new_redis_pool(1, "fair_tenant-url")
          begin
            pool.with(&block)
          ensure
            pool.shutdown { |conn| conn.close if conn.respond_to?(:close) }
          end
        else
          Sidekiq.redis_pool.with(&block)
        end
      rescue StandardError
        nil
      end

      def tls_from(conn)
        ssl, params = if redis_rb?(conn)
                        conn._client.options.values_at(:ssl, :ssl_params)
                      else
                        [conn.config.ssl, conn.config.ssl_params]
                      end
        return {} unless ssl

        ssl_settings((params || {}).transform_keys(&:to_sym))
      end

      # OpenSSL::SSL::SSLContext parameters, as Sidekiq passes them to its client, to the gem's keys.
      def ssl_settings(params)
        settings = { ssl: true }
        settings[:ssl_ca_file] = params[:ca_file].to_s if params[:ca_file]
        settings[:ssl_cert_pem] = params[:cert].to_pem if params[:cert]
        settings[:ssl_key_pem] = params[:key].private_to_pem if params[:key]
        settings[:ssl_verify_mode] = "none" if params[:verify_mode].to_s == TlsSettings::OpenSSLVerify::NONE
        settings[:ssl_verify_hostname] = false if params[:verify_hostname] == false
        settings
      end

      def redis_rb?(conn)
        defined?(::Redis) && conn.is_a?(::Redis)
      end

      def sentinel_from(conn)
        if redis_rb?(conn)
          sentinel_from_redis_rb(conn._client)
        elsif conn.config.respond_to?(:sentinel?) && conn.config.sentinel?
          sentinel_from_redis_client(conn.config)
        end
      end

      # redis-client (7.x): a RedisClient::SentinelConfig; its host and port would ask the sentinels.
      def sentinel_from_redis_client(config)
        sentinels = config.sentinels
        first = sentinels.first
        user = first&.username
        { sentinels: sentinels.map { |s| [s.host.to_s, Integer(s.port)] }, sentinel_master: config.name,
          sentinel_username: user == "default" ? nil : user, sentinel_password: first&.password,
          redis_url: "#{scheme(config)}://#{userinfo(config)}#{config.name}/#{config.db}" }
      end

      # redis-rb 4.8 (6.x): the sentinels in the client's options, the master's name as its host.
      def sentinel_from_redis_rb(client)
        sentinels = client.options[:sentinels]
        return if sentinels.nil? || sentinels.empty?

        entries = sentinels.map { |s| s.to_h.transform_keys(&:to_sym) }
        { sentinels: entries.map { |s| SentinelSettings.sentinel_address(s) },
          sentinel_master: client.host.to_s, sentinel_username: entries.first[:username],
          sentinel_password: entries.first[:password],
          redis_url: "#{scheme(client)}://#{userinfo(client)}#{client.host}/#{client.db}" }
      end

      def from_connection(conn)
        sentinel = sentinel_from(conn)
        return sentinel[:redis_url] if sentinel

        # redis-rb (6.x) connections answer `config` with the CONFIG command: ask their client.
        config = redis_rb?(conn) ? conn._client : conn.config
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

      # Percent-encoding as URLs (and the redis crate) read it: a space is %20, never "+".
      def escape(part)
        URI.encode_www_form_component(part.to_s).gsub("+", "%20")
      end
    end
  end
end
