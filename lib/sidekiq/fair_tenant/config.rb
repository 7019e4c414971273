# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Runtime configuration. Every key can also be set through the environment as
    # `SIDEKIQ_FAIR_TENANT_<KEY>` (the names sidekiq-fair_tenant used), e.g.
    # `SIDEKIQ_FAIR_TENANT_MAX_THROTTLING_WINDOW=3600`.
    #
    #   Sidekiq::FairTenant.configure do |config|
    #     config.max_throttling_window = 1.day
    #     config.redis_url = ENV["FAIR_TENANT_REDIS_URL"]
    #     config.read_timeout = 0.2
    #   end
    class Config
      include Settings::Redis
      include Settings::Tls
      include Settings::Sentinel
      include FairQueues::Settings

      ENV_PREFIX = "SIDEKIQ_FAIR_TENANT_"
      DEFAULT_ENQUEUES_KEY = Native::Names::DEFAULT_ENQUEUES_KEY

      DEFAULTS = {
        max_throttling_window: 86_400,
        enqueues_key: DEFAULT_ENQUEUES_KEY,
        redis_url: nil,
        pool_size: 10,
        connect_timeout: 0.5,
        read_timeout: 0.5,
        write_timeout: 0.5,
        reconnect_backoff: 1,
        sweep_interval: 5,
        sweep_batch: 100
      }.merge(Settings::Tls::DEFAULTS, Settings::Sentinel::DEFAULTS, FairQueues::Settings::DEFAULTS).freeze

      # Settings that the native Redis client is built from.
      CONNECTION_KEYS = %i[enqueues_key redis_url pool_size connect_timeout read_timeout write_timeout
                           reconnect_backoff ssl ssl_ca_file ssl_cert_file ssl_key_file ssl_verify_mode
                           ssl_verify_hostname sentinels sentinel_master sentinel_username
                           sentinel_password sentinel_ssl].freeze

      attr_reader(*DEFAULTS.keys)
      attr_writer :logger

      def initialize(env = ENV)
        DEFAULTS.each { |key, value| instance_variable_set(:"@#{key}", value) }
        @logger = nil
        DEFAULTS.each_key do |key|
          value = env["#{ENV_PREFIX}#{key.upcase}"]
          next if value.nil? || value.empty?

          begin
            public_send(:"#{key}=", value)
          rescue ConfigurationError => e
            raise ConfigurationError, "#{ENV_PREFIX}#{key.upcase}: #{e.message}"
          end
        end
      end

      def logger
        @logger || Sidekiq.logger
      end

      def max_throttling_window=(value)
        @max_throttling_window = positive(:max_throttling_window, value, integer: true)
      end

      def enqueues_key=(value)
        format = value.to_s
        Native::Client.check_key_format(format)
        @enqueues_key = format
      end

      def pool_size=(value)
        @pool_size = positive(:pool_size, value, integer: true)
      end

      def connect_timeout=(value)
        @connect_timeout = positive(:connect_timeout, value)
      end

      def read_timeout=(value)
        @read_timeout = positive(:read_timeout, value)
      end

      def write_timeout=(value)
        @write_timeout = positive(:write_timeout, value)
      end

      # Seconds during which calls fail open at once after Redis was found unreachable (then a probe runs).
      def reconnect_backoff=(value)
        @reconnect_backoff = positive(:reconnect_backoff, value)
      end

      # Seconds between two sweeps of expired concurrency leases in each server process.
      def sweep_interval=(value)
        @sweep_interval = positive(:sweep_interval, value)
      end

      # Scopes with parked jobs looked at per sweep (picked at random when there are more).
      def sweep_batch=(value)
        @sweep_batch = positive(:sweep_batch, value, integer: true)
      end

      def raw_connection_settings
        CONNECTION_KEYS.to_h { |key| [key, public_send(key)] }
      end

      private

      def positive(name, value, integer: false)
        number = numeric(value)
        raise ConfigurationError, "#{name} must be a positive number, got #{value.inspect}" unless number&.positive?

        if integer && number != number.to_i
          raise ConfigurationError,
                "#{name} must be a whole number, got #{value.inspect}"
        end

        integer ? number.to_i : number.to_f
      end

      def numeric(value)
        case value
        when Numeric then value
        when String then Float(value, exception: false)
        else value.respond_to?(:to_f) ? value.to_f : nil # ActiveSupport::Duration
        end
      end
    end
  end
end
