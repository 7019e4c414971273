# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Reads the settings of the Redis server Sidekiq itself uses, field by field, as the gem's connection
    # keys: host and port or unix socket path, db, username and password (a lambda password is called
    # here), TLS (`ssl`, `ssl_params`) and Sentinel (sentinels, master name, their credentials and TLS).
    # Works on Sidekiq 6.x (redis-rb 4.8 connections) and 7.x/8.x (redis-client), without connecting.
    module SidekiqRedisSettings
      module_function

      # The gem's keys for Sidekiq's Redis, read in one pass; nil when Sidekiq has none to read. Read once per
      # process (and again in a forked child), and again only when Sidekiq's Redis settings change.
      def detect
        source = settings_source
        cached = @cached
        return cached[1] if cached && cached[0] == source

        settings = read
        @cached = [source, settings.freeze]
        settings
      rescue StandardError
        nil
      end

      # What the settings are read from: on 7.x/8.x the options given to `config.redis =` (and the
      # REDIS_URL they fall back to), on 6.x its pool, rebuilt on `Sidekiq.redis =`.
      def settings_source
        return [::Process.pid, Sidekiq.redis_pool] unless sidekiq7?

        options = Sidekiq.default_configuration.instance_variable_get(:@redis_config) || {}
        [::Process.pid, options, options[:url] || options["url"] || provider_url]
      end

      def read
        return from_redis_client(redis_client_config) if sidekiq7?

        Sidekiq.redis_pool.with { |conn| from_connection(conn) }
      end

      def sidekiq7?
        Sidekiq.respond_to?(:default_configuration)
      end

      # Sidekiq 7+ builds its own pool once, on first use, from the settings given so far (asking for it here
      # could fix it before the app's `config.redis = ...` runs), and logs a line for every pool it builds.
      # The client configuration Sidekiq would build its pools from, made as RedisConnection.create makes it
      # but without a pool, a connection or a log line.
      def redis_client_config
        options = symbolize(Sidekiq.default_configuration.instance_variable_get(:@redis_config) || {})
        options[:url] ||= provider_url
        options.reject! { |key, _| POOL_OPTIONS.include?(key) }
        Sidekiq::RedisClientAdapter.new(options).new_client.config
      end

      POOL_OPTIONS = %i[logger size pool_timeout pool_name cluster_safe].freeze

      # REDIS_PROVIDER names the variable that holds the URL, else REDIS_URL (RedisConnection's rule).
      def provider_url
        Sidekiq::RedisConnection.send(:determine_redis_provider)
      end

      def symbolize(object)
        case object
        when Hash then object.to_h { |key, value| [key.to_sym, symbolize(value)] }
        when Array then object.map { |value| symbolize(value) }
        else object
        end
      end

      def from_connection(conn)
        # redis-rb (6.x) connections answer `config` with the CONFIG command: ask their client.
        redis_rb?(conn) ? from_redis_rb(conn._client) : from_redis_client(conn.config)
      end

      def redis_rb?(conn)
        defined?(::Redis) && conn.is_a?(::Redis)
      end

      # redis-rb 4.8 (6.x): under Sentinel the client's host is the master's name, and the sentinels
      # are reached with the master's options (TLS included).
      def from_redis_rb(client)
        options = client.options
        settings = tls_settings(options[:ssl], options[:ssl_params])
        settings.merge!(credentials(client.db, client.username, client.password))
        sentinels = options[:sentinels]
        return settings.merge!(address(client.host, client.port, client.path)) if sentinels.nil? || sentinels.empty?

        entries = sentinels.map { |s| s.to_h.transform_keys(&:to_sym) }
        addresses = entries.map { |s| SentinelSettings.sentinel_address(s) }
        settings.merge!(sentinel_keys(redis_rb_master_name(client), addresses,
                                      entries.first, options[:ssl]))
      end

      # Once connected, a redis-rb 4.8 client's host is the master's address; its Sentinel connector keeps
      # the name.
      def redis_rb_master_name(client)
        connector = client.instance_variable_get(:@connector)
        (connector.instance_variable_get(:@master) if connector.instance_variable_defined?(:@master)) || client.host
      end

      # redis-client (7.x/8.x): a RedisClient::Config, or a SentinelConfig whose host and port would ask
      # the sentinels (never called here).
      def from_redis_client(config)
        settings = tls_settings(config.ssl, config.ssl_params)
        settings.merge!(credentials(config.db, config.username, config.password))
        return settings.merge!(address(config.host, config.port, config.path)) unless sentinel_config?(config)

        first = config.sentinels.first
        auth = { username: first&.username, password: first&.password }
        settings.merge!(sentinel_keys(config.name, config.sentinels.map { |s| [s.host.to_s, Integer(s.port)] },
                                      auth, first&.ssl))
      end

      def sentinel_config?(config)
        config.respond_to?(:sentinel?) && config.sentinel?
      end

      def sentinel_keys(master, addresses, auth, ssl)
        { sentinels: addresses, sentinel_master: master.to_s, sentinel_username: user(auth[:username]),
          sentinel_password: auth[:password], sentinel_ssl: ssl ? true : false }
      end

      def address(host, port, path)
        return { path: path.to_s } if path

        { host: host.to_s.delete_prefix("[").delete_suffix("]"), port: Integer(port) }
      end

      def credentials(db, username, password)
        { db: Integer(db || 0), username: user(username), password: password&.to_s }
      end

      # "default" is the user a bare password logs in as.
      def user(name)
        name.nil? || name.to_s == "default" ? nil : name.to_s
      end

      # OpenSSL::SSL::SSLContext parameters that carry files or keys, and how the gem takes them.
      PEM_PARAMS = { ca_file: [:ssl_ca_file, :to_s.to_proc], cert: [:ssl_cert_pem, :to_pem.to_proc],
                     key: [:ssl_key_pem, :private_to_pem.to_proc] }.freeze

      # OpenSSL::SSL::SSLContext parameters, as Sidekiq passes them to its client, to the gem's keys.
      def tls_settings(ssl, params)
        return {} unless ssl

        params = (params || {}).transform_keys(&:to_sym)
        settings = { ssl: true }
        PEM_PARAMS.each { |param, (key, convert)| settings[key] = convert.call(params[param]) if params[param] }
        settings.merge!(verification(params))
      end

      def verification(params)
        { ssl_verify_mode: ("none" if params[:verify_mode].to_s == TlsSettings::OpenSSLVerify::NONE),
          ssl_verify_hostname: (false if params[:verify_hostname] == false) }.compact
      end
    end
  end
end
