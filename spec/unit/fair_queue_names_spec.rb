# frozen_string_literal: true

require "spec_helper"

# Issue 33, item 6: `fair_queues` refuses, at configuration time, a name it could not use.
RSpec.describe "fair_queues names" do
  let(:config) { Sidekiq::FairTenant::Config.new({}) }
  let(:error) { Sidekiq::FairTenant::ConfigurationError }

  it "refuses an empty or blank name in an Array or between commas" do
    [[""], ["  "], [nil], ["fair", ""], "fair,,slow", "fair,"].each do |value|
      expect { config.fair_queues = value }.to raise_error(error, /fair_queues: a queue name is empty/), value.inspect
    end
  end

  it "refuses control characters, key-breaking characters and overlong names, naming the rule" do
    max = Sidekiq::FairTenant::Native::Names::FAIR_QUEUE_MAX_BYTES
    {
      ["imp\norts"] => /no control characters/,
      ["a{b"] => /has none of \{\},/,
      [{ "a}b" => :time }] => /has none of \{\},/,
      [{ "" => :jobs }] => /a queue name is empty/,
      ["q" * (max + 1)] => /at most #{max} bytes, got #{max + 1} bytes/,
      ["queue:fair"] => /without the queue: prefix/,
      ["fair:bytes"] => /"jobs" or "time"/
    }.each do |value, rule|
      expect { config.fair_queues = value }.to raise_error(error, rule), value.inspect
    end
  end

  it "takes valid names, and none from a blank String (an unset environment variable)" do
    longest = "q" * Sidekiq::FairTenant::Native::Names::FAIR_QUEUE_MAX_BYTES
    config.fair_queues = ["fair", { "imports:v2" => :time }, longest]
    expect(config.fair_queues.first(2)).to eq(%w[fair imports:v2])
    expect(config.fair_time_queues).to eq(%w[imports:v2])
    config.fair_queues = " fair , slow:time "
    expect(config.fair_queues).to eq(%w[fair slow])
    config.fair_queues = " "
    expect(config.fair_queues).to eq([])
  end

  it "refuses a weight for a queue that is no valid fair queue name, before any Redis call" do
    expect { Sidekiq::FairTenant::Native::Fair.weight_field("acme", "a{b") }
      .to raise_error(ArgumentError, /has none of/)
    expect(Sidekiq::FairTenant::Native::Fair.weight_field("acme", "fair")).to eq("acme\nfair")
  end

  it "refuses a weight for a tenant whose name holds the field's separator (it would read back as tenant + queue)" do
    weights = Sidekiq::FairTenant.weights
    expect { weights.set(2, tenant: "acme\nfair") }.to raise_error(ArgumentError, /holds a newline/)
    expect { weights.get(tenant: "acme\nfair") }.to raise_error(ArgumentError, /holds a newline/)
    expect { weights.delete(tenant: "acme\nfair", queue: "fair") }.to raise_error(ArgumentError, /holds a newline/)
  end
end
