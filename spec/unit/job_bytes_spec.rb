# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::FairQueues::JobBytes do
  describe ".fix_time" do
    it "keeps an enqueue time the scripts read (seconds, or Sidekiq 8's milliseconds)" do
      [1_700_000_000.5, 1_700_000_000_500, 0].each do |time|
        payload = { "enqueued_at" => time }
        expect(described_class.fix_time(payload, 42.0)).to be(false)
        expect(payload["enqueued_at"]).to eq(time)
      end
    end

    it "replaces one they could not read by now: absent, text, NaN, Infinity, below 0, huge, wrong types" do
      ["nan", "1700000000", Float::NAN, Float::INFINITY, -Float::INFINITY, -1, 10**30, 1e300, [], {}, nil, true]
        .each do |time|
          payload = { "enqueued_at" => time }
          expect(described_class.fix_time(payload, 42.0)).to be(true)
          expect(payload["enqueued_at"]).to eq(42.0)
        end
      payload = {}
      expect(described_class.fix_time(payload, 42.0)).to be(true)
      expect(payload).to eq("enqueued_at" => 42.0)
    end
  end
end
