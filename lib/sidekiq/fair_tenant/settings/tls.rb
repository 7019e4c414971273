# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # The TLS keys of Config (docs/CONFIGURATION.md).
      module Tls
        # OpenSSL::SSL::VERIFY_NONE / VERIFY_PEER as Sidekiq's ssl_params give them, without loading openssl.
        module OpenSSLVerify
          NONE = "0"
          PEER = "1"
        end

        VERIFY_MODES = %w[peer none].freeze
        DEFAULTS = { ssl: nil, ssl_ca_file: nil, ssl_cert_file: nil, ssl_key_file: nil, ssl_verify_mode: "peer",
                     ssl_verify_hostname: true }.freeze

        # TLS on a redis:// URL too (a rediss:// URL turns it on by itself).
        def ssl=(value)
          @ssl = value.nil? ? nil : boolean(:ssl, value)
        end

        # PEM files: the CA to check the server against (instead of the system roots), and a client
        # certificate and its key for mutual TLS.
        %i[ssl_ca_file ssl_cert_file ssl_key_file].each do |key|
          define_method(:"#{key}=") do |value|
            instance_variable_set(:"@#{key}", value.nil? || value.to_s.empty? ? nil : value.to_s)
          end
        end

        # "peer" checks the server's certificate; "none" accepts any (providers with self-signed ones).
        def ssl_verify_mode=(value)
          mode = { OpenSSLVerify::PEER => "peer", OpenSSLVerify::NONE => "none" }.fetch(value.to_s, value.to_s.downcase)
          unless VERIFY_MODES.include?(mode)
            raise ConfigurationError, "ssl_verify_mode must be one of #{VERIFY_MODES.join(", ")}, got #{value.inspect}"
          end

          @ssl_verify_mode = mode
        end

        # false: check the certificate chain but not that it names the host.
        def ssl_verify_hostname=(value)
          @ssl_verify_hostname = boolean(:ssl_verify_hostname, value)
        end

        # These settings as Sidekiq's Redis options (`ssl`, and `ssl_params` with OpenSSL objects), for a
        # Sidekiq connection to the gem's server (the CLI's --redis-url).
        def sidekiq_tls_options
          require "openssl"
          params = { ca_file: ssl_ca_file, cert: read_pem(:ssl_cert_file) { |pem| OpenSSL::X509::Certificate.new(pem) },
                     key: read_pem(:ssl_key_file) { |pem| OpenSSL::PKey.read(pem) },
                     verify_mode: (OpenSSL::SSL::VERIFY_NONE if ssl_verify_mode == "none"),
                     verify_hostname: (false if ssl_verify_hostname == false) }.compact
          options = ssl ? { ssl: true } : {}
          params.empty? ? options : options.merge(ssl_params: params)
        end

        private

        def read_pem(key)
          path = public_send(key) or return nil
          yield File.read(path)
        rescue SystemCallError, OpenSSL::OpenSSLError => e
          raise ConfigurationError, "#{key} #{path} cannot be read: #{e.message}"
        end

        def boolean(name, value)
          case value.to_s.downcase
          when "true", "1", "yes" then true
          when "false", "0", "no" then false
          else raise ConfigurationError, "#{name} must be true or false, got #{value.inspect}"
          end
        end
      end
    end
  end
end
