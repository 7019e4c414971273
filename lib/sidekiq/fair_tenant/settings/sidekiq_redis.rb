# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # Reads the settings of the Redis server Sidekiq itself uses, field by field, as the gem's connection
      # keys: host and port or unix socket path, db, username and password (a lambda password is called
      # here), TLS (`ssl`, `ssl_params`) and Sentinel (sentinels, master name, their credentials and TLS).
      #
      # The source is what the app gave Sidekiq's public setter (SidekiqRedisGiven), else
      # REDIS_PROVIDER/REDIS_URL as Sidekiq's rule; on 6.x a ConnectionPool given to `Sidekiq.redis =`, or settings
      # given before this gem was loaded, are read from Sidekiq's own pool. Read once per process, again in a forked
      # child and after `config.redis =`; never through a pool or a connection of the gem's, nor another library's
      # instance variables.
      module SidekiqRedis
        POOL_OPTIONS = %i[logger size pool_timeout pool_name cluster_safe namespace].freeze

        @cached = nil

        module_function

        # The gem's keys for Sidekiq's Redis, read in one pass; nil when Sidekiq has none to read.
        def detect
          source = [::Process.pid, SidekiqRedisGiven.version, provider_url]
          cached = @cached
          return cached[1] if cached && cached[0] == source

          settings = read.freeze
          @cached = [source, settings]
          settings
        rescue StandardError
          nil
        end

        def read
          options = SidekiqRedisGiven.given
          return from_redis_client(redis_client_config(options || {})) if SidekiqRedisGiven.sidekiq7?
          return from_redis_rb(redis_rb_client(options)) if options.is_a?(Hash)

          (options || Sidekiq.redis_pool).with { |conn| from_redis_rb(conn._client) }
        end

        # The client configuration Sidekiq builds its pools from (as RedisConnection.create does, without its
        # pool or log line): a redis-client config, made by a client that never connects.
        def redis_client_config(options)
          options = options.except(*POOL_OPTIONS)
          options[:url] ||= provider_url
          Sidekiq::RedisClientAdapter.new(options).new_client.config
        end

        # redis-rb 4.8 (6.x) parses the options as the client Sidekiq's pool would make; never connected, its
        # host is the Sentinel master's name.
        def redis_rb_client(options)
          options = options.except(*POOL_OPTIONS)
          options[:url] ||= provider_url
          ::Redis::Client.new(options)
        end

        # REDIS_PROVIDER names the variable that holds the URL, else REDIS_URL (Sidekiq's rule).
        def provider_url
          ENV.fetch(ENV.fetch("REDIS_PROVIDER", "REDIS_URL"), nil)
        end

        def symbolize(object)
          case object
          when Hash then object.to_h { |key, value| [key.to_sym, symbolize(value)] }
          when Array then object.map { |value| symbolize(value) }
          else object
          end
        end

        # redis-rb 4.8 (6.x): under Sentinel the client's host is the master's name until it connects (then its
        # address), and the sentinels are reached with the master's options (TLS included).
        def from_redis_rb(client)
          options = client.options
          settings = tls_settings(options[:ssl], options[:ssl_params])
          settings.merge!(credentials(client.db, client.username, client.password))
          sentinels = options[:sentinels]
          return settings.merge!(address(client.host, client.port, client.path)) if sentinels.nil? || sentinels.empty?

          entries = sentinels.map { |s| s.to_h.transform_keys(&:to_sym) }
          addresses = entries.map { |s| Sentinel.sentinel_address(s) }
          settings.merge!(sentinel_keys(client.host, addresses, entries.first, options[:ssl]))
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
          { ssl_verify_mode: ("none" if params[:verify_mode].to_s == Tls::OpenSSLVerify::NONE),
            ssl_verify_hostname: (false if params[:verify_hostname] == false) }.compact
        end
      end
    end
  end
end
