# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # The Sentinel keys of Config (docs/CONFIGURATION.md). With `sentinels`, the gem asks
      # them for the master's address; the master's credentials and db still come from the Redis URL, whose
      # host is the master name unless `sentinel_master` gives it.
      module Sentinel
        DEFAULTS = { sentinels: nil, sentinel_master: nil, sentinel_username: nil, sentinel_password: nil,
                     sentinel_ssl: false }.freeze
        RULE = 'sentinels must be "host:port" strings or {host:, port:} hashes (port 1-65535)'

        # "host:port" strings (an IPv6 host in brackets), {host:, port:} hashes, or one comma-separated
        # String (the environment's form). Kept as [host, port] pairs.
        def sentinels=(value)
          list = value.is_a?(String) ? value.split(",").map(&:strip).reject(&:empty?) : Array(value)
          @sentinels = list.empty? ? nil : list.map { |entry| Sentinel.sentinel_address(entry) }
        end

        %i[sentinel_master sentinel_username sentinel_password].each do |key|
          define_method(:"#{key}=") do |value|
            instance_variable_set(:"@#{key}", value.nil? || value.to_s.empty? ? nil : value.to_s)
          end
        end

        # TLS to the sentinels too, with the CA, client certificate and verification of the ssl_* keys.
        def sentinel_ssl=(value)
          @sentinel_ssl = boolean(:sentinel_ssl, value)
        end

        def self.sentinel_address(entry)
          host, port = entry.is_a?(Hash) ? from_hash(entry) : from_string(entry.to_s)
          port = Integer(port.to_s, 10, exception: false)
          if host.to_s.empty? || port.nil? || !(1..65_535).cover?(port)
            raise ConfigurationError, "#{RULE}, got #{entry.inspect}"
          end

          [host.to_s, port]
        end

        def self.from_hash(entry)
          entry = entry.transform_keys(&:to_sym)
          [entry[:host], entry[:port]]
        end

        def self.from_string(entry)
          match = entry.match(/\A\[(?<host>[^\]]+)\]:(?<port>\d+)\z/) || entry.match(/\A(?<host>[^:]+):(?<port>\d+)\z/)
          match ? [match[:host], match[:port]] : [nil, nil]
        end
      end
    end
  end
end
