# frozen_string_literal: true

require "spec_helper"
require "logger"
require "stringio"

RSpec.describe Sidekiq::FairTenant::Interval do
  let(:pace) { described_class.new(10) }

  it "is due at once, then once per interval" do
    expect(pace.due?(100.0)).to be(true)
    expect(pace.due?(105.0)).to be(false)
    expect(pace.due?(109.9)).to be(false)
    expect(pace.due?(110.0)).to be(true)
    expect(pace.due?(115.0, every: 2)).to be(false)
    expect(pace.due?(120.0, every: 2)).to be(true)
    expect(pace.due?(122.0)).to be(true)
  end

  it "comes due sooner, never later, with within" do
    pace.due?(100.0)
    pace.within(3, 100.0)
    expect(pace.due?(102.9)).to be(false)
    expect(pace.due?(103.0)).to be(true)
    pace.within(30, 103.0) # later than the interval: no change
    expect(pace.due?(113.0)).to be(true)
  end

  it "can be made due at once, or never" do
    pace.never!
    expect(pace.due?(1e12)).to be(false)
    pace.now!
    expect(pace.due?(0.0)).to be(true)
  end
end

RSpec.describe Sidekiq::FairTenant::RateLimitedLog do
  let(:out) { StringIO.new }
  let(:logger) { Logger.new(out) }

  it "logs a key once per interval and counts what it suppressed" do
    log = described_class.new(interval: 0.05)
    expect(log.warn(:a, logger) { "first" }).to be(true)
    expect(log.warn(:a, logger) { "second" }).to be(false)
    expect(log.warn(:b, logger) { "other key" }).to be(true)
    sleep 0.06
    expect(log.warn(:a, logger) { "third" }).to be(true)
    expect(out.string.lines.map { |line| line[/\[sidekiq-fair_tenant\] .*/] })
      .to eq(["[sidekiq-fair_tenant] first", "[sidekiq-fair_tenant] other key",
              "[sidekiq-fair_tenant] third (1 similar warnings suppressed)"])
  end
end
