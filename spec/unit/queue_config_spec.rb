# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::Routing::QueueConfig do
  let(:classes) { [ThrottledJob, DurationRuleJob] }

  it "weighs a class's queue 2^n and its rules' queues down to 1, keeping the largest for shared queues" do
    expect(described_class.weights(classes)).to eq("default" => 4, "throttled_2x" => 2, "throttled_4x" => 1,
                                                   "slow" => 1)
    expect(described_class.yaml(classes)).to eq(<<~YAML)
      # ThrottledJob: default -> throttled_2x, throttled_4x
      # DurationRuleJob: default -> slow
      :queues:
        - [default, 4]
        - [throttled_2x, 2]
        - [slow, 1]
        - [throttled_4x, 1]
    YAML
  end

  it "finds every loaded job class with rules" do
    expect(Sidekiq::FairTenant::JobClasses.routed).to include(ThrottledJob, DurationRuleJob, HundredJob)
    expect(Sidekiq::FairTenant::JobClasses.routed).not_to include(PlainJob)
  end

  describe "boot check" do
    it "warns when a rule's queue is not processed here (stranded jobs) or outweighs its source" do
      problems = described_class.problems({ "default" => 1, "throttled_2x" => 3 }, [ThrottledJob])
      expect(problems).to contain_exactly(
        a_string_including('ThrottledJob re-routes to "throttled_4x", which this process does not work on'),
        a_string_including('throttled queue "throttled_2x" (weight 3) outweighs its source "default" (weight 1)')
      )
    end

    it "says nothing when the process is set up as the rules imply, or does not work on the source" do
      expect(described_class.problems(described_class.weights([ThrottledJob]), [ThrottledJob])).to be_empty
      expect(described_class.problems({ "critical" => 1 }, [ThrottledJob])).to be_empty
    end

    it "reads Sidekiq 6 options and Sidekiq 7+ capsules, and logs at startup" do
      expect(described_class.process_weights({ queues: %w[default default throttled_2x] }))
        .to eq("default" => 2, "throttled_2x" => 1)
      capsule = Struct.new(:weights).new({ "default" => 3, "slow" => 0 })
      config = Struct.new(:capsules).new({ "default" => capsule })
      expect(described_class.process_weights(config)).to eq("default" => 3, "slow" => 1)

      log = capture_log { described_class.warn_at_boot({ queues: %w[default] }) }
      expect(log).to include("WARN").and include("would be stranded")
    end
  end
end
