# frozen_string_literal: true

require "digest"
require "logger"
require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/long_tenant_app"

# Issue 33, item 6: a tenant name longer than Names::TENANT_MAX_BYTES (here 1 MB of "é", and 300 ASCII bytes)
# is stored as a prefix cut on a character boundary, "~sha1:" and the SHA-1 of the whole name, the same in
# routing, slots, rate caps and the fair queue; the job runs; one warning names the class and the length.
RSpec.describe "Tenant names longer than the maximum" do
  let(:servers) { [] }
  let(:log) { StringIO.new }
  let(:max) { Sidekiq::FairTenant::Native::Names::TENANT_MAX_BYTES }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure do |c|
      c.fair_queues = %w[fair]
      c.logger = Logger.new(log)
    end
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure do |c|
      c.fair_queues = []
      c.logger = nil
    end
  end

  def stored(name)
    cut = name.byteslice(0, max - "~sha1:".bytesize - 40).scrub("")
    "#{cut}~sha1:#{Digest::SHA1.hexdigest(name)}"
  end

  # Every key, hash field and set or sorted set member (not values: job payloads carry their arguments).
  def names_in_redis
    redis.keys("*").flat_map do |key|
      case redis.type(key)
      when "hash" then [key, *redis.hkeys(key)]
      when "set" then [key, *redis.smembers(key)]
      when "zset" then [key, *redis.zrange(key, 0, -1)]
      else [key]
      end
    end
  end

  def expect_short_names_only
    names = names_in_redis
    expect(names.map(&:bytesize).max).to be <= max + 100
    expect(names.grep(/é{120}|a{260}/)).to be_empty
    expect(names.grep(/#{Regexp.escape(stored(LongTenantJob::TENANTS["wide"]))}/)).not_to be_empty
  end

  it "keeps only the short form in Redis, shows it in why and stats, and runs the jobs" do
    wide, ascii = LongTenantJob::TENANTS.values_at("wide", "ascii")
    jids = [LongTenantJob.perform_async("wide", 1), LongTenantJob.perform_async("wide", 2),
            LongTenantJob.perform_async("ascii", 3)]

    why = Sidekiq::FairTenant.why(jids.first)
    expect(why[:tenant]).to eq(stored(wide))
    tenant = why[:tenant]
    expect([tenant.encoding, tenant.valid_encoding?, tenant.bytesize]).to eq([Encoding::UTF_8, true, max])
    expect(JSON.parse(Sidekiq.dump_json(why))["tenant"]).to eq(stored(wide))
    # The slot and rate scopes the payload carries are UTF-8 too (Ruby 3.3's JSON refuses binary high bytes).
    scope = Sidekiq::FairTenant::Native::Slots.tenant_scope(stored(wide), "fair")
    expect(scope.map(&:encoding)).to eq([Encoding::UTF_8] * 2)
    expect(Sidekiq::FairTenant.why(jids.last)[:tenant]).to eq(stored(ascii))
    rows = Sidekiq::FairTenant.fair_stats.queue("fair")[:page]
    expect(rows.map { |row| row[:tenant] }).to contain_exactly(stored(wide), stored(ascii))
    expect(Sidekiq::FairTenant.stats.tenant(LongTenantJob, wide)[:tenant]).to eq(stored(wide))
    expect_short_names_only

    servers << SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 2, queues: %w[fair],
                                  app: File.expand_path("../support/long_tenant_app.rb", __dir__)).start
    wait_for("the three jobs to run") { redis.llen(FairApp::EVENTS) == 3 }

    started = redis.lrange(FairApp::EVENTS, 0, -1).map { |event| JSON.parse(event)["jid"] }
    expect(started).to match_array(jids)
    expect_short_names_only
  end

  it "warns once per class with the length, never the name" do
    3.times { |i| LongTenantJob.perform_async("wide", i) }

    warnings = log.string.lines.grep(/LongTenantJob: a tenant name of/)
    expect(warnings.size).to eq(1)
    expect(warnings.first).to include("of 1000000 bytes is longer than #{max}")
    expect(log.string).not_to include("é" * 20)
  end
end
