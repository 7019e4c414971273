# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_rules_app"

# Re-routing rules and fair queues together (Sidekiq 6.4 or 7.3, whichever the bundle has), on the spec Redis:
# `fair` and `fair_throttled` are fair queues; the rules of the classes in fair_rules_app.rb re-route from `fair`.
RSpec.describe "Re-routing rules on fair queues" do
  let(:servers) { [] }

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair fair_throttled] } }

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def backlog(queue) = redis.hget("#{Sidekiq::FairTenant::Native::Fair.base(queue)}state", "n").to_i

  def waiting(queue, tenant)
    redis.lrange("#{Sidekiq::FairTenant::Native::Fair.base(queue)}t:#{tenant}", 0, -1).map { |j| JSON.parse(j) }
  end

  def counted(job_class, queue, tenant)
    entries(Sidekiq::FairTenant.native.router.key_for(job_class, queue, tenant))
  end

  it "keeps a rule-bearing job in its fair queue: no routing round trip, nothing counted" do
    RulesOnFairJob.perform_async("acme", 0) # loads the library
    sent = monitor_commands { 5.times { |i| RulesOnFairJob.perform_async("acme", i + 1) } }

    expect(sent).to eq(["fcall"] * 5) # the fair push alone
    expect(backlog("fair")).to eq(6)
    expect(backlog("fair_throttled")).to eq(0)
    expect(Sidekiq::Queue.new("fair").size).to eq(6)
    expect(waiting("fair", "acme").map { |j| j["args"] }).to eq((0..5).map { |i| ["acme", i] })
    expect(waiting("fair", "acme").flat_map(&:keys)).not_to include("fair_tenant_rule", "fair_tenant_counted")
    expect(counted("RulesOnFairJob", "fair", "acme")).to eq(0)
  end

  it "re-routes as before when the job's queue is not fair" do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair_throttled] }
    3.times { |i| RulesOnFairJob.perform_async("acme", i) }

    expect(queue_size("fair")).to eq(1)
    expect(backlog("fair_throttled")).to eq(2) # the rule's target is still a fair queue
    expect(waiting("fair_throttled", "acme").first).to include("fair_tenant_rerouted_from" => "fair",
                                                               "fair_tenant_rule" => 0)
  end

  it "re-routes from a fair queue with from_fair_queue: true" do
    RerouteFromFairJob.perform_async("warm", 0) # loads both scripts
    sent = monitor_commands { 3.times { |i| RerouteFromFairJob.perform_async("acme", i) } }

    expect(sent).to eq(%w[evalsha fcall] * 3) # routing (the gem's pool), then the fair push
    expect(backlog("fair")).to eq(2)
    expect(backlog("fair_throttled")).to eq(2)
    expect(waiting("fair_throttled", "acme").map { |j| j["args"] }).to eq([["acme", 1], ["acme", 2]])
    expect(waiting("fair_throttled", "acme").first).to include("fair_tenant_rerouted_from" => "fair",
                                                               "fair_tenant_rule" => 0, "fair_tenant_counted" => true)
  end

  it "applies on a fair queue only the rules that ask for it, counting as for every rule" do
    5.times { |i| IsolatingFairJob.perform_async("acme", i) }

    # The throttling rule (threshold 1) would fire from the 2nd job on; the isolating one fires from the 4th.
    expect(backlog("fair")).to eq(3)
    expect(backlog("fair_throttled")).to eq(0)
    expect(queue_jobs("own_processes").map { |j| j["args"] }).to eq([["acme", 4], ["acme", 3]])
    expect(queue_jobs("own_processes").first).to include("fair_tenant_rule" => 1)
    expect(counted("IsolatingFairJob", "fair", "acme")).to eq(5)
  end

  it "predicts in the stats a fair queue's next queue by the rules that apply there" do
    stats = Sidekiq::FairTenant.stats
    2.times { |i| IsolatingFairJob.perform_async("acme", i) }
    expect(stats.tenant(IsolatingFairJob, "acme")).to include(next_queue: "fair", throttled: false)
    IsolatingFairJob.perform_async("acme", 2)
    expect(stats.tenant(IsolatingFairJob, "acme")).to include(next_queue: "own_processes", throttled: true)
    expect(stats.tenants(IsolatingFairJob).tenants.first).to include(tenant: "acme", next_queue: "own_processes")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    expect(stats.tenant(IsolatingFairJob, "acme")).to include(next_queue: "own_processes") # the last rule wins
  end

  it "raises ArgumentError naming the class and the rule for a from_fair_queue that is not true or false" do
    rule = /rule #1 \{.*from_fair_queue.*"yes"\}/
    message = /\ABadFairRuleJob: invalid fair_tenant_queues #{rule}: from_fair_queue must be true or false\z/
    expect do
      Class.new do
        include Sidekiq::Worker

        def self.name = "BadFairRuleJob"
        sidekiq_options queue: "fair",
                        fair_tenant_queues: [{ queue: "slow", threshold: 1, from_fair_queue: "yes" }]
      end
    end.to raise_error(ArgumentError, message)
  end

  it "runs the jobs where their rules sent them, and says so once at boot" do
    server = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 3,
                                queues: %w[fair,6 fair_throttled,3 own_processes,1],
                                app: File.expand_path("../support/fair_rules_app.rb", __dir__)).start
    servers << server
    4.times { |i| RulesOnFairJob.perform_async("acme", i) }
    3.times { |i| RerouteFromFairJob.perform_async("acme", i) }
    events = wait_for("7 jobs to run") do
      list = redis.lrange(FairRulesApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
      list if list.size == 7
    end

    queues = events.group_by { |e| e["class"] }.transform_values { |es| es.map { |e| e["queue"] }.tally }
    expect(queues).to eq("RulesOnFairJob" => { "fair" => 4 },
                         "RerouteFromFairJob" => { "fair" => 1, "fair_throttled" => 2 })
    log = File.read(server.log)
    lines = log.lines.grep(/fair_tenant_queues rules do not re-route jobs of a fair queue/)
    expect(lines.size).to eq(1)
    expect(lines.first).to include("[sidekiq-fair_tenant] fair queues keep their jobs")
    expect(lines.first).to include("the jobs of IsolatingFairJob, RulesOnFairJob in fair stay there")
    expect(lines.first).to include("add from_fair_queue: true to the rule")
    expect(lines.first).to include("re-route jobs of fair queues: IsolatingFairJob (fair -> own_processes); " \
                                   "RerouteFromFairJob (fair -> fair_throttled)")
    expect(log).not_to include("which this process does not work on")
  end

  it "leaves the rules that do not apply on a fair queue out of the boot queue check" do
    check = Sidekiq::FairTenant::Routing::QueueConfig
    expect(check.problems({ "fair" => 1, "own_processes" => 1 }, [RulesOnFairJob, IsolatingFairJob])).to be_empty
    expect(check.problems({ "fair" => 1 }, [RerouteFromFairJob]))
      .to include(a_string_including('RerouteFromFairJob re-routes to "fair_throttled"'))
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    expect(check.problems({ "fair" => 1, "own_processes" => 1 }, [RulesOnFairJob]))
      .to include(a_string_including('RulesOnFairJob re-routes to "fair_throttled"'))
  end

  it "has nothing to say at boot without fair queues or without rules on them" do
    check = Sidekiq::FairTenant::FairQueues::RulesCheck
    expect(check.notice([RulesOnFairJob, ThrottledJob])).to include("RulesOnFairJob")
    expect(check.notice([ThrottledJob])).to be_nil # its queue, default, is not fair
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    expect(Sidekiq::FairTenant::FairQueues::RulesCheck.notice([RulesOnFairJob])).to be_nil
  end
end
