# frozen_string_literal: true

require "spec_helper"

# Issue 33, item 6: what a number in a class's options accepts (docs/CONFIGURATION.md, "Option values"): an
# Integer, or a String of decimal digits (values from the environment); seconds may be a decimal String too.
RSpec.describe "number option values" do
  native = Sidekiq::FairTenant::Native

  def concurrency(limit: 1, lease: 60)
    Sidekiq::FairTenant::Native::Concurrency.list("NumbersJob", { limit: limit, lease: lease })
  end

  def rate(limit: 1, per: 1)
    Sidekiq::FairTenant::Native::Rate.list("NumbersJob", [{ limit: limit, per: per }])
  end

  def rules(threshold: 1, per: 60)
    Sidekiq::FairTenant::Native::RuleSet.new("NumbersJob", [{ queue: "slow", threshold: threshold, per: per }], 86_400)
  end

  it "takes an Integer, a whole Float and a String of decimal digits as a count" do
    [2, 2.0, "2", " 2 "].each do |value|
      expect { concurrency(limit: value) }.not_to raise_error, value.inspect
      expect { rate(limit: value) }.not_to raise_error, value.inspect
      expect { rules(threshold: value) }.not_to raise_error, value.inspect
    end
  end

  it "refuses a fraction, other text, a sign and booleans in a count, naming the class and the rule" do
    [2.5, "2.5", "2.0", "", "abc", "-1", "+1", "1e3", "0x10", true, false].each do |value|
      expect { concurrency(limit: value) }
        .to raise_error(ArgumentError, /NumbersJob.*limit must be an Integer >= 0/), value.inspect
      expect { rate(limit: value) }
        .to raise_error(ArgumentError, /NumbersJob.*limit must be an Integer >= 1/), value.inspect
      expect { rules(threshold: value) }.to raise_error(ArgumentError, /NumbersJob.*threshold/), value.inspect
    end
  end

  it "takes seconds as a number or a decimal String, and refuses other text" do
    [90, 0.5, "90", "0.5", "3600.0"].each do |value|
      expect { concurrency(lease: value) }.not_to raise_error, value.inspect
      expect { rate(per: value) }.not_to raise_error, value.inspect
      expect { rules(per: value) }.not_to raise_error, value.inspect
    end
    ["", "abc", "1e3", ".5", "-1", true].each do |value|
      expect { concurrency(lease: value) }.to raise_error(ArgumentError, /NumbersJob.*lease must be/), value.inspect
      expect { rate(per: value) }.to raise_error(ArgumentError, /NumbersJob.*per must be/), value.inspect
      expect { rules(per: value) }.to raise_error(ArgumentError, /NumbersJob.*per/), value.inspect
    end
  end

  it "is the rule a class's sidekiq_options are checked with at boot" do
    expect(native::Names::TENANT_MAX_BYTES).to eq(256)
    expect do
      Class.new do
        include Sidekiq::Job
        def self.name = "EnvLimitJob"
        sidekiq_options fair_tenant_concurrency: { limit: "abc" }
      end
    end.to raise_error(ArgumentError, /EnvLimitJob.*limit must be an Integer >= 0/)
  end
end
