# frozen_string_literal: true

require "spec_helper"
require "active_support/notifications"

RSpec.describe Sidekiq::FairTenant::Instrumentation do
  def events(name)
    seen = []
    subscriber = ActiveSupport::Notifications.subscribe("#{name}.sidekiq_fair_tenant") do |*args|
      seen << ActiveSupport::Notifications::Event.new(*args).payload
    end
    yield
    seen
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber)
  end

  it "publishes a re-route with the rule that fired" do
    seen = events(:reroute) { 4.times { ThrottledJob.perform_async(1) } }
    expect(seen.size).to eq(1)
    expect(seen.first).to include(job_class: "ThrottledJob", tenant: "tenant-1", from: "default",
                                  to: "throttled_2x", rule: 0)
    expect(seen.first[:jid]).to eq(queue_jobs("throttled_2x").first["jid"])
  end

  it "never lets a failing subscriber break a push" do
    subscriber = ActiveSupport::Notifications.subscribe("reroute.sidekiq_fair_tenant") { raise "boom" }
    log = capture_log { 4.times { ThrottledJob.perform_async(1) } }
    expect(queue_size("throttled_2x")).to eq(1)
    expect(log).to include("reroute subscriber raised RuntimeError: boom")
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber)
  end

  it "logs at debug level when ActiveSupport::Notifications is not loaded" do
    hide_const("ActiveSupport::Notifications")
    io = StringIO.new
    Sidekiq::FairTenant.config.logger = Logger.new(io, level: Logger::DEBUG)
    described_class.instrument(:park, jid: "j1", queue: "default")
    expect(io.string).to include("DEBUG").and include("[sidekiq-fair_tenant] park jid=j1 queue=default")
  ensure
    Sidekiq::FairTenant.config.logger = nil
  end

  describe "concurrency slots" do
    let(:slots) { Sidekiq::FairTenant.native.slots }
    let(:scope) { Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default") }
    let(:middleware) { Sidekiq::FairTenant::ServerMiddleware.new }
    let(:job_class) do
      Class.new do
        include Sidekiq::Worker
        def self.name = "InstrumentedSlotJob"
      end
    end

    def job(jid)
      { "class" => "InstrumentedSlotJob", "jid" => jid, "queue" => "default", "fair_tenant" => "acme",
        "enqueued_at" => Time.now.to_f, "fair_tenant_concurrency" => { "limit" => 1, "lease" => 60 } }
    end

    it "publishes park and hand-over" do
      stub_const("InstrumentedSlotJob", job_class)
      worker = job_class.new
      parked = []
      handed = events(:hand_over) do
        middleware.call(worker, job("first"), "default") do
          parked = events(:park) { middleware.call(worker, job("second"), "default") { raise "must not run" } }
        end
      end
      expect(parked.first).to include(jid: "second", tenant: "acme", queue: "default", scope: scope)
      expect(handed).to eq([{ scope: scope, count: 1 }])
    end

    it "publishes the hand-over a raised limit causes" do
      tag, sub = scope
      slots.acquire(tag, sub, "a", 60_000, 1, { jid: "a", queue: "default" }.to_json, 1.0)
      slots.acquire(tag, sub, "b", 60_000, 1, { jid: "b", queue: "default" }.to_json, 2.0)
      seen = events(:hand_over) { Sidekiq::FairTenant.limits.set(2, tenant: "acme") }
      expect(seen).to eq([{ scope: [tag, "*"], count: 1 }])
    end

    it "publishes reclaimed leases from the sweep" do
      tag, sub = scope
      slots.acquire(tag, sub, "dead", 200, 1, { jid: "dead", queue: "default" }.to_json, 1.0)
      slots.acquire(tag, sub, "waiting", 60_000, 1, { jid: "waiting", queue: "default" }.to_json, 2.0)
      sleep 0.25 # the 200 ms lease of "dead" runs out; nobody releases it
      seen = events(:lease_reclaimed) { Sidekiq::FairTenant::Concurrency::Slots.send(:sweep) }
      expect(seen).to eq([{ count: 1, handed: 1 }])
    end
  end
end
