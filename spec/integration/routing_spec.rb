# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::ClientMiddleware do
  def key(job_class, tenant)
    Sidekiq::FairTenant.native.router.key_for(job_class, "default", tenant)
  end

  it "is registered in the client chain on require, without sidekiq/testing" do
    expect(sidekiq_config.client_middleware.exists?(described_class)).to be(true)
    expect(defined?(Sidekiq::Testing)).to be_nil
  end

  describe "re-routing" do
    it "keeps jobs in their queue up to the threshold, then sends them to the last matching rule's queue" do
      6.times { ThrottledJob.perform_async(1) }

      expect(queue_size("default")).to eq(3)
      expect(queue_size("throttled_2x")).to eq(2) # 4th and 5th: over 3 per minute
      expect(queue_size("throttled_4x")).to eq(1) # 6th: over 5 per 10 s too, and the last rule wins
      rerouted = queue_jobs("throttled_4x").first
      expect(rerouted).to include("fair_tenant" => "tenant-1", "fair_tenant_rule" => 1,
                                  "fair_tenant_rerouted_from" => "default", "fair_tenant_counted" => true)
    end

    it "counts each tenant separately" do
      5.times { ThrottledJob.perform_async(1) }
      3.times { ThrottledJob.perform_async(2) }

      tenants = queue_jobs("default").map { |j| j["fair_tenant"] }
      expect(tenants.count("tenant-2")).to eq(3)
      expect(tenants.count("tenant-1")).to eq(3)
    end

    it "forgets enqueues once they leave the window (time from Ruby, so travel works)" do
      4.times { ThrottledJob.perform_async(1) }
      expect(queue_size("throttled_2x")).to eq(1)

      travel 61.seconds
      ThrottledJob.perform_async(1)
      expect(queue_size("default")).to eq(4)

      travel 30.seconds
      3.times { ThrottledJob.perform_async(1) }
      # 4 enqueues in the last 60 s (one at +61 s, three at +91 s): over 3 again.
      expect(queue_size("throttled_2x")).to eq(2)
    end

    it "keeps a bounded number of entries per tenant, however many jobs it enqueues", gc_stress: false do
      1_000.times { HundredJob.perform_async }
      expect(entries(key("HundredJob", "bulk"))).to eq(0)

      1_000.times { HundredJob.set(fair_tenant: "bulk").perform_async }
      # The newest 101 decide (threshold 100); up to 32 more are appended before a rewrite trims them.
      expect(entries(key("HundredJob", "bulk"))).to be_between(101, 133)
      # Twice the window, set by the last rewrite (at most 32 pushes ago).
      expect(redis.ttl(key("HundredJob", "bulk"))).to be_between(7190, 7200)
      expect(queue_size("default")).to eq(1_000 + 100)
      expect(queue_size("slow")).to eq(900)
    end

    it "keeps the newest enqueue times in order when clients' clocks disagree" do
      rules = Sidekiq::FairTenant::Native::RuleSet.new("SkewJob", [{ queue: "slow", threshold: 2, per: 10 }], 86_400)
      now = Time.now.to_f
      router = Sidekiq::FairTenant.native.router
      fired = [0, 3, 1, 2].map { |dt| router.route(rules, "SkewJob", "default", "s", now + dt) }

      times = Sidekiq::FairTenant::Native::Router.decode_times(redis.get(key("SkewJob", "s")))
      expect(times).to eq([now + 1, now + 2, now + 3]) # the 3 newest (threshold + 1), sorted
      expect(fired).to eq([nil, nil, 0, 0])
    end

    it "decides exactly like counting every enqueue, across appends, rewrites, skewed clocks and TTL refreshes",
       gc_stress: false do
      specs = [{ queue: "slow", threshold: 5, per: 10 }, { queue: "slower", threshold: 40, per: 100 }]
      rules = Sidekiq::FairTenant::Native::RuleSet.new("ModelJob", specs, 86_400)
      rng = Random.new(RSpec.configuration.seed)
      now = Time.now.to_f
      history = []
      mismatches = []
      outcomes = Hash.new(0)
      2_000.times do |i|
        now += case rng.rand(100)
               when 0..4 then -rng.rand * 5 # a client whose clock is behind
               when 5 then 60 + (rng.rand * 60) # idle past half the longest window: a TTL refresh
               else rng.rand * 0.5
               end
        history << now
        expected = specs.rindex { |r| history.count { |t| t >= now - r[:per] } > r[:threshold] }
        got = Sidekiq::FairTenant.native.router.route(rules, "ModelJob", "default", "m", now)
        mismatches << [i, expected, got] unless got == expected
        outcomes[expected] += 1

        value = redis.get(key("ModelJob", "m"))
        held = Sidekiq::FairTenant::Native::Router.decode_times(value)
        # The header says when the TTL was last set: never more than half the longest window ago.
        raise "TTL last set #{now - value.unpack1("G")}s before push #{i}" if now - value.unpack1("G") > 50
        raise "held #{held.size} times at push #{i}" unless held.size.between?(1, 41 + 32)
        raise "held times out of order at push #{i}" unless held == held.sort

        # The tenant index follows within a second (a hundredth of the 100 s window) of the newest push.
        lag = history.max - redis.hget("sidekiq-fair_tenant:tenants:ModelJob", "m").unpack1("G")
        raise "tenant index #{lag}s behind at push #{i}" unless lag < 1.0 + 1e-6
      end

      expect(mismatches).to eq([])
      expect(outcomes.keys).to contain_exactly(nil, 0, 1)
      expect(redis.pttl(key("ModelJob", "m"))).to be > 100_000 # 1.5 windows at least, whatever happened
    end

    it "makes exactly one extra Redis round trip per push" do
      ThrottledJob.perform_async(9) # the first call may load the script
      plain = monitor_commands { PlainJob.perform_async }
      routed = monitor_commands { ThrottledJob.perform_async(9) }

      expect(plain).to eq(%w[sadd lpush])
      expect(routed).to eq(%w[evalsha sadd lpush])
    end
  end

  describe "tenant detection" do
    it "takes job['fair_tenant'] first, then self.fair_tenant(*args), then job['apartment']" do
      ThrottledJob.set(fair_tenant: "explicit").perform_async(1)
      ThrottledJob.perform_async(2)
      Sidekiq::Client.push("class" => NoTenantJob, "args" => [], "apartment" => "apt")

      tenants = (queue_jobs("default") + queue_jobs("slow")).map { |j| j["fair_tenant"] }
      expect(tenants).to contain_exactly("explicit", "tenant-2", "apt")
    end

    it "turns symbols and integers into strings" do
      ThrottledJob.set(fair_tenant: :acme).perform_async(nil)
      ThrottledJob.set(fair_tenant: 42).perform_async(nil)

      expect(queue_jobs("default").map { |j| j["fair_tenant"] }).to contain_exactly("acme", "42")
      expect(redis.exists?(key("ThrottledJob", "acme"))).to be(true)
      expect(redis.exists?(key("ThrottledJob", "42"))).to be(true)
    end

    it "pushes a job without a tenant unchanged and warns once per class, not once per push" do
      log = capture_log { 5.times { NoTenantJob.perform_async } }

      expect(queue_size("default")).to eq(5)
      expect(log.scan("NoTenantJob has fair_tenant_queues but no tenant").size).to eq(1)
    end

    it "handles hostile tenant strings as distinct, verbatim keys" do
      tenants = HostileTenantJob::TENANTS
      tenants.each_index { |i| 2.times { HostileTenantJob.perform_async(i) } }

      expect(queue_size("slow")).to eq(tenants.size * 2)
      tenants.each do |t|
        # Each tenant's own two pushes, in its own key (trimmed to one only at the next rewrite); the 10 KB name
        # is stored by digest (docs/CONFIGURATION.md, "Tenant names").
        stored = Sidekiq::FairTenant::JobInfo.stored_name(t)
        expect(entries(Sidekiq::FairTenant.native.router.key_for("HostileTenantJob", "default", stored))).to eq(2)
      end
      expect(redis.keys("sidekiq-fair_tenant:enqueued:*").size).to eq(tenants.size)
      expect(redis.hlen("sidekiq-fair_tenant:tenants:HostileTenantJob")).to eq(tenants.size)
      expect(queue_jobs("slow").map { |j| j["fair_tenant"] }).to include("\uFFFD\uFFFD", "line\nbreak")
    end
  end

  describe "explicit queues" do
    it "never re-routes a job pushed to another queue (no sidekiq/testing loaded)" do
      4.times { ThrottledJob.perform_async(1) }
      3.times { ThrottledJob.set(queue: "critical").perform_async(1) }

      expect(queue_size("critical")).to eq(3)
      expect(queue_jobs("critical").map { |j| j["fair_tenant_counted"] }).to all(be_nil)
    end
  end

  describe "rule validation" do
    it "raises ArgumentError naming the class and the rule at sidekiq_options time" do
      expect do
        Class.new do
          include Sidekiq::Worker

          def self.name = "BadRulesJob"
          sidekiq_options fair_tenant_queues: [{ queue: "slow", threshold: -1 }]
        end
      end.to raise_error(ArgumentError,
                         /BadRulesJob: invalid fair_tenant_queues rule #1 .*threshold must not be negative/)
    end

    [
      [[{ queue: "slow" }], /threshold is missing/],
      [[{ queue: "", threshold: 1 }], /non-blank/],
      [[{ queue: "slow", threshold: 1, per: 0 }], /per must be positive/],
      [[{ queue: "slow", threshold: 1, per: 2.days }], /exceeds max_throttling_window/],
      [{ queue: "slow", threshold: 1 }, /must be an Array/],
      [["slow"], /must be a Hash/]
    ].each do |rules, message|
      it "rejects #{rules.inspect}" do
        expect { ThrottledJob.set(fair_tenant_queues: rules).perform_async(1) }
          .to raise_error(ArgumentError, /ThrottledJob: .*#{message.source}/)
        expect(queue_size("default")).to eq(0)
      end
    end
  end

  describe "re-pushes by Sidekiq's scheduler and retry poller" do
    it "counts a scheduled job once, when it reaches its queue, with Duration rules JSON round-tripped" do
      DurationRuleJob.set(fair_tenant: "t").perform_in(60)
      DurationRuleJob.set(fair_tenant: "t").perform_in(60)
      stored = JSON.parse(redis.zrange("schedule", 0, 0).first)
      expect(stored["fair_tenant_queues"].first["per"]).to eq("3600") # what JSON made of 1.hour
      expect(redis.exists?(key("DurationRuleJob", "t"))).to be(false)

      travel 61.seconds
      enqueue_scheduled

      expect(redis.zcard("schedule")).to eq(0)
      expect(queue_size("default") + queue_size("slow")).to eq(2)
      expect(queue_size("slow")).to eq(1)
      expect(entries(key("DurationRuleJob", "t"))).to eq(2)
    end

    it "counts a retried job once and leaves it where it was routed" do
      2.times { DurationRuleJob.set(fair_tenant: "t").perform_async }
      payload = redis.rpop("queue:slow")
      redis.zadd("retry", Time.now.to_f - 1, JSON.generate(JSON.parse(payload).merge("retry_count" => 0)))

      enqueue_scheduled

      expect(queue_size("slow")).to eq(1)
      expect(entries(key("DurationRuleJob", "t"))).to eq(2)
    end

    it "takes over a sorted set left under the same key by sidekiq-fair_tenant" do
      redis.zadd(key("DurationRuleJob", "t"), [[Time.now.to_i, "jid:old1"], [Time.now.to_i, "jid:old2"]])
      2.times { DurationRuleJob.set(fair_tenant: "t").perform_async }

      expect(redis.type(key("DurationRuleJob", "t"))).to eq("string")
      expect(entries(key("DurationRuleJob", "t"))).to eq(2)
      expect(queue_size("slow")).to eq(1)
    end

    it "never raises or loses a re-pushed job whose stored rules are invalid" do
      bad = { "class" => "DurationRuleJob", "args" => [], "fair_tenant" => "t", "queue" => "default",
              "fair_tenant_queues" => [{ "queue" => "slow", "threshold" => "lots" }] }
      redis.zadd("schedule", Time.now.to_f - 1, JSON.generate(bad.merge("jid" => "j1")))

      log = capture_log { enqueue_scheduled }

      expect(queue_jobs("default").map { |j| j["jid"] }).to eq(["j1"])
      expect(log).to include("DurationRuleJob: invalid fair_tenant_queues rule #1")
    end

    it "routes a job pushed by class name from a process that does not know the class" do
      payload = { "class" => "Not::Loaded::Here", "args" => [], "queue" => "default", "fair_tenant" => "t",
                  "fair_tenant_queues" => [{ "queue" => "slow", "threshold" => 0 }] }
      Sidekiq::Client.push(payload)

      expect(queue_size("slow")).to eq(1)
    end
  end
end
