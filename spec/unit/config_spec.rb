# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::Config do
  it "has the original gem's defaults and accessors" do
    config = described_class.new({})
    expect(config.max_throttling_window).to eq(86_400)
    expect(config.enqueues_key).to eq("sidekiq-fair_tenant:enqueued:%<job_class>s:tenant:%<fair_tenant>s")
    expect(config.logger).to be(Sidekiq.logger)
    expect(Sidekiq::FairTenant.max_throttling_window).to eq(Sidekiq::FairTenant.config.max_throttling_window)
    expect(Sidekiq::FairTenant.enqueues_key).to eq(Sidekiq::FairTenant.config.enqueues_key)
  end

  it "reads every key from SIDEKIQ_FAIR_TENANT_<KEY>" do
    env = {
      "SIDEKIQ_FAIR_TENANT_MAX_THROTTLING_WINDOW" => "3600",
      "SIDEKIQ_FAIR_TENANT_ENQUEUES_KEY" => "ft:{%<fair_tenant>s}:%<job_class>s",
      "SIDEKIQ_FAIR_TENANT_REDIS_URL" => "redis://cache:6380/2",
      "SIDEKIQ_FAIR_TENANT_POOL_SIZE" => "3",
      "SIDEKIQ_FAIR_TENANT_CONNECT_TIMEOUT" => "0.25",
      "SIDEKIQ_FAIR_TENANT_READ_TIMEOUT" => "1",
      "SIDEKIQ_FAIR_TENANT_WRITE_TIMEOUT" => "2"
    }
    config = described_class.new(env)
    expect(config).to have_attributes(max_throttling_window: 3600, enqueues_key: "ft:{%<fair_tenant>s}:%<job_class>s",
                                      redis_url: "redis://cache:6380/2", pool_size: 3, connect_timeout: 0.25,
                                      read_timeout: 1.0, write_timeout: 2.0)
  end

  it "names the variable when an environment value is invalid" do
    expect { described_class.new("SIDEKIQ_FAIR_TENANT_POOL_SIZE" => "many") }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /SIDEKIQ_FAIR_TENANT_POOL_SIZE: pool_size/)
  end

  it "rejects bad values with ConfigurationError" do
    config = described_class.new({})
    expect { config.max_throttling_window = 0 }.to raise_error(Sidekiq::FairTenant::ConfigurationError)
    expect { config.pool_size = 1.5 }.to raise_error(Sidekiq::FairTenant::ConfigurationError)
    expect { config.read_timeout = -1 }.to raise_error(Sidekiq::FairTenant::ConfigurationError)
    expect { config.enqueues_key = "ft:%<job_class>s" }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /must contain %<fair_tenant>s/)
    expect { config.enqueues_key = "ft:%<tenant>s" }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, /unknown reference "tenant"/)
  end

  it "accepts ActiveSupport durations" do
    config = described_class.new({})
    config.max_throttling_window = 2.hours
    expect(config.max_throttling_window).to eq(7200)
  end

  it "with no redis_url of its own, follows Sidekiq's Redis (which the spec configures from REDIS_URL)" do
    url = URI(ENV.fetch("REDIS_URL"))
    settings = described_class.new({}).connection_settings

    expect(settings).to include(redis_url: nil, host: url.host, port: url.port, db: url.path[1..].to_i)
    expect(Sidekiq::FairTenant.native.server).to eq("redis://#{url.host}:#{url.port}/#{url.path[1..].to_i}")
  end

  it "gives its TLS settings as Sidekiq's Redis options, and names a file it cannot read" do
    config = described_class.new({})
    expect(config.sidekiq_tls_options).to eq({})

    config.ssl = true
    config.ssl_ca_file = "/etc/ca.pem"
    config.ssl_verify_mode = "none"
    config.ssl_verify_hostname = false
    expect(config.sidekiq_tls_options)
      .to eq(ssl: true, ssl_params: { ca_file: "/etc/ca.pem", verify_mode: OpenSSL::SSL::VERIFY_NONE,
                                      verify_hostname: false })

    config.ssl_cert_file = "/nonexistent/client.crt"
    expect { config.sidekiq_tls_options }
      .to raise_error(Sidekiq::FairTenant::ConfigurationError, %r{ssl_cert_file /nonexistent/client\.crt cannot})
  end

  it "falls back to REDIS_URL, then localhost, when Sidekiq's settings cannot be read" do
    allow(Sidekiq::FairTenant::Settings::SidekiqRedis).to receive(:detect).and_return(nil)
    expect(described_class.new({}).connection_settings[:redis_url]).to eq(ENV.fetch("REDIS_URL"))
    url = ENV.delete("REDIS_URL")
    expect(described_class.new({}).connection_settings[:redis_url]).to eq("redis://localhost:6379/0")
  ensure
    ENV["REDIS_URL"] = url if url
  end

  it "reads Sidekiq 6.x's Redis settings from its pool, and configure never asks for them",
     unless: SpecHelpers::SIDEKIQ7 do
    Sidekiq.redis(&:ping) # Sidekiq's pool exists, built from REDIS_URL
    allow(Sidekiq::FairTenant::Settings::SidekiqRedis).to receive(:detect).and_call_original
    Sidekiq::FairTenant.configure { |c| c.pool_size = 4 }
    expect(Sidekiq::FairTenant::Settings::SidekiqRedis).not_to have_received(:detect)
  ensure
    Sidekiq::FairTenant.configure { |c| c.pool_size = 10 }
  end

  # Sidekiq 7+ builds its internal pool once, on first use: reading the settings must not build it early.
  it "reads Sidekiq 7's settings from what config.redis= was given, with no pool, and unbrackets IPv6 hosts",
     if: SpecHelpers::SIDEKIQ7 do
    config = Sidekiq.default_configuration
    saved = config.instance_variable_get(:@redis_config)
    own_pool = config.instance_variable_get(:@redis)
    given = Sidekiq::FairTenant::Settings::SidekiqRedisGiven.given
    config.instance_variable_set(:@redis, nil)
    allow(ConnectionPool).to receive(:new).and_call_original
    config.redis = { url: "redis://:s3cret@[::1]:6380/2" }

    expect(Sidekiq::FairTenant::Settings::SidekiqRedis.detect)
      .to eq(host: "::1", port: 6380, db: 2, username: nil, password: "s3cret")
    expect(ConnectionPool).not_to have_received(:new)
  ensure
    config.instance_variable_set(:@redis_config, saved)
    config.instance_variable_set(:@redis, own_pool)
    Sidekiq::FairTenant::Settings::SidekiqRedisGiven.given = given
  end

  it "rebuilds the native client when connection settings change, not otherwise" do
    first = Sidekiq::FairTenant.native
    Sidekiq::FairTenant.configure { |c| c.logger = Sidekiq.logger }
    expect(Sidekiq::FairTenant.native).to be(first)
    expect(Sidekiq::FairTenant.native.router).to be(first.router)

    Sidekiq::FairTenant.configure { |c| c.pool_size = 7 }
    expect(Sidekiq::FairTenant.native).not_to be(first)
    expect(Sidekiq::FairTenant.native.pool_stats[:size]).to eq(7)
    expect(Sidekiq::FairTenant.native.router).not_to be(first.router) # and its router, slots, stats, limits
  ensure
    Sidekiq::FairTenant.configure { |c| c.pool_size = 10 }
  end

  it "uses its own key format for routing" do
    Sidekiq::FairTenant.configure { |c| c.enqueues_key = "custom:%<queue>s:%<job_class>s:%<fair_tenant>s" }
    NoTenantJob.set(fair_tenant: "t").perform_async
    expect(entries("custom:default:NoTenantJob:t")).to eq(1)
  ensure
    Sidekiq::FairTenant.configure { |c| c.enqueues_key = Sidekiq::FairTenant::Config::DEFAULT_ENQUEUES_KEY }
  end
end
