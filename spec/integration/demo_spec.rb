# frozen_string_literal: true

require "open3"
require "sidekiq"
require "tmpdir"
require_relative "../../demo/report"

RSpec.describe "bin/demo" do
  describe Demo::Report do
    it "computes percentiles by linear interpolation" do
      values = [5, 1, 4, 2, 3]
      expect(described_class.percentile(values, 50)).to eq(3)
      expect(described_class.percentile(values, 95)).to be_within(1e-9).of(4.8)
      expect(described_class.percentile(values, 100)).to eq(5)
      expect(described_class.percentile([], 50)).to be_nil
      expect(described_class.summary(values)).to eq(p50: 3, p95: described_class.percentile(values, 95), max: 5,
                                                    count: 5)
    end

    it "computes the ideal small-tenant wait R + max(m*s*(K+1)/W, sqrt(2*B*S/W))" do
      # W 10, S 0.02, K 20, m 3, s 0.02: B 1.2; m*s*(K+1)/W 0.126 beats sqrt(0.0048) 0.0693.
      ideal = described_class.ideal_wait(threads: 10, greedy_s: 0.02, small_tenants: 20, per_tenant: 3, small_s: 0.02)
      expect(ideal).to be_within(1e-9).of(0.02 + 0.126)
      # Long greedy jobs: the square-root term wins. W 4, S 2, K 2, m 1, s 0.1: B 0.2, sqrt(0.2) > 0.075.
      ideal = described_class.ideal_wait(threads: 4, greedy_s: 2.0, small_tenants: 2, per_tenant: 1, small_s: 0.1)
      expect(ideal).to be_within(1e-9).of(2.0 + Math.sqrt(0.2))
    end

    it "computes Jain's fairness index" do
      expect(described_class.jain([10, 10])).to eq(1.0)
      expect(described_class.jain([10, 0])).to eq(0.5)
      expect(described_class.jain([1, 2, 3])).to be_within(1e-9).of(36.0 / 42)
    end

    it "counts the most intervals open at once" do
      expect(described_class.peak_concurrency([[0, 2], [1, 3], [2, 4], [2.5, 3]])).to eq(3)
      expect(described_class.peak_concurrency([[0, 1], [1, 2]])).to eq(1) # one ends as the next starts
      expect(described_class.peak_concurrency([])).to eq(0)
    end

    it "measures throughputs while every greedy tenant is backlogged" do
      records = [
        { "tenant" => "a", "enqueued_at" => 0.0, "started_at" => 0.5 },
        { "tenant" => "a", "enqueued_at" => 0.0, "started_at" => 1.5 },
        { "tenant" => "a", "enqueued_at" => 0.0, "started_at" => 3.0 },
        { "tenant" => "b", "enqueued_at" => 1.0, "started_at" => 1.2 },
        { "tenant" => "b", "enqueued_at" => 1.0, "started_at" => 2.0 }
      ]
      # Window [1.0, 2.0]: a starts 1, b starts 2.
      expect(described_class.backlogged_throughputs(records, %w[a b])).to eq("a" => 1.0, "b" => 2.0)
      expect(described_class.backlogged_throughputs(records, %w[a c])).to be_nil
    end
  end

  it "runs a small demo end to end in all three modes; re-routing shortens small waits, slots cap the greedy" do
    Dir.mktmpdir("fair-tenant-demo") do |out|
      root = File.expand_path("../..", __dir__)
      env = { "REDIS_URL" => nil, "FAIR_TENANT_DEMO_SETUP_DONE" => "1" }
      cmd = [File.join(root, "bin/demo"), "--jobs", "200", "--small-tenants", "5", "--threads", "5",
             "--job-ms", "5", "--slot-limit", "3", "--out", out]
      stdout, stderr, status = Open3.capture3(env, *cmd, chdir: root)
      expect(status).to be_success, "bin/demo failed:\n#{stdout}\n#{stderr}"

      expect(stdout).to include("Sidekiq #{Sidekiq::VERSION} server processes") # this bundle's Sidekiq
      expect(stdout).to match(/^ideal small-tenant wait \d+\.\d+s = R /)
      expect(stdout).to include("slot limit 3 per tenant (lease 60s)")
      modes = %w[plain fair_tenant fair_tenant+slots]
      peaks = modes.to_h do |mode|
        m = Regexp.escape(mode)
        %w[small greedy].each do |klass|
          expect(stdout).to match(/^#{m} +#{klass} +wait p50 +\d+\.\d+s +p95 +\d+\.\d+s +max +\d+\.\d+s/)
        end
        expect(stdout).to match(%r{^#{m} +makespan \d+\.\d+s +\d+ jobs/s +small p95 / ideal \d+\.\d+x})
        line = /^#{m} +greedy total \d+\.\d+s \((\d+\.\d+)x plain\), at most (\d+) running at once/
        expect(stdout).to match(line)
        [mode, stdout[line, 2].to_i]
      end
      expect(stdout).to match(/^plain +greedy total \d+\.\d+s \(1\.00x plain\)/)
      expect(peaks["fair_tenant+slots"]).to be_between(1, 3)
      expect(peaks["plain"]).to be <= 5
      expect(stdout).not_to include("not available")
      expect(stderr.scan(%r{\] 215/215 jobs}).size).to eq(3)
      %w[wait.png wait.svg].each do |file|
        expect(stdout).to include("chart: #{File.join(out, file)}")
        expect(File.size(File.join(out, file))).to be_positive
      end

      p95 = modes.to_h { |m| [m, stdout[/^#{Regexp.escape(m)} +small +wait p50 +\S+ +p95 +(\d+\.\d+)s/, 1].to_f] }
      expect(p95["fair_tenant"]).to be < p95["plain"]
      expect(p95["fair_tenant+slots"]).to be < p95["plain"]
    end
  end
end
