# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # Which Redis server the gem uses (Config's redis_url and what it falls back to), and the settings the
      # native client is built from.
      module Redis
        TLS_KEYS = %i[ssl ssl_ca_file ssl_cert_file ssl_key_file ssl_cert_pem ssl_key_pem ssl_verify_mode
                      ssl_verify_hostname].freeze
        DEFAULT_REDIS_URL = "redis://localhost:6379/0"

        def redis_url=(value)
          @redis_url = value.nil? || value.to_s.empty? ? nil : value.to_s
        end

        # What the native client is built from: plain values, field by field. The server is, in order: the
        # configured redis_url (parsed once, in Rust); with sentinels of its own, the master sentinel_master
        # names; Sidekiq's own Redis, as fields (SidekiqRedis: host/port or path, db, username,
        # password, Sentinel); REDIS_URL; localhost. With no redis_url of its own, the gem also takes Sidekiq's
        # TLS settings, for each key still at its default.
        def connection_settings
          check_sentinel_master
          resolve(raw_connection_settings)
        end

        private

        def resolve(settings)
          follow_sidekiq(settings) if settings[:redis_url].nil?
          if settings[:redis_url].nil? && !settings.key?(:host) && !settings.key?(:path) && settings[:sentinels].nil?
            settings[:redis_url] = ENV.fetch("REDIS_URL", nil) || DEFAULT_REDIS_URL
          end
          settings.merge(ssl_verify_peer: settings[:ssl_verify_mode] == "peer")
        end

        # Sidekiq's TLS settings for the keys still at their defaults, and (with no sentinels of its own)
        # Sidekiq's server, credentials and Sentinel settings. Nothing when Sidekiq's cannot be read.
        def follow_sidekiq(settings)
          sidekiq = SidekiqRedis.detect or return

          own_sentinels = !settings[:sentinels].nil?
          sidekiq.each do |key, value|
            if TLS_KEYS.include?(key)
              settings[key] = value if self.class::DEFAULTS[key] == settings[key] # Config's
            elsif !own_sentinels
              settings[key] = value
            end
          end
        end

        # With sentinels but no redis_url, sentinel_master names the master (which then has no credentials, db 0).
        def check_sentinel_master
          return if sentinels.nil? || redis_url || sentinel_master

          raise ConfigurationError, "sentinel_master is required with sentinels, unless redis_url names the master " \
                                    "(redis://:password@master-name/0)"
        end
      end
    end
  end
end
