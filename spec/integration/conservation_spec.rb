# frozen_string_literal: true

require "spec_helper"
require_relative "../support/conservation/run"

# Every job in exactly one place, whatever happens: a seeded random run of pushes, fetches, acks, requeues,
# crashes, recoveries, heartbeat lapses, weight and limit changes, refused writes and fair-off/on, checked
# after every step (spec/support/conservation). A failure prints its seed and the steps before each kind of
# violation; replay with CONSERVATION_SEED=<seed>. Longer: CONSERVATION_STEPS=20000 (runs of CHUNK steps,
# seeds seed, seed + 1, ...). CONSERVATION_WITHOUT=garbage,lapse,refused,bytes leaves step kinds out.
RSpec.describe "Conservation of jobs in fair queues" do
  chunk = 2000
  seed = (ENV["CONSERVATION_SEED"] || (Random.new_seed % (1 << 32))).to_i
  total = (ENV["CONSERVATION_STEPS"] || 1500).to_i
  runs = Array.new((total + chunk - 1) / chunk) { |i| [seed + i, [chunk, total - (i * chunk)].min] }

  before do
    # A fetch that finds nothing blocks in BRPOP for TIMEOUT: a short one keeps the run fast.
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
  end

  after do
    Sidekiq::FairTenant::FairFetch::Recovery.instance_variable_set(:@next, 0.0)
    Sidekiq::FairTenant::FairFetch::IdleLook.instance_variable_set(:@look_at, 0.0)
    Thread.current[Sidekiq::FairTenant::FairFetch::IdleLook::KEY] = nil
  end

  runs.each do |run_seed, steps|
    it "keeps every job waiting, in flight, done or dead, once, and none runs again once its ack was applied " \
       "(seed #{run_seed}, #{steps} steps)" do
      run = Conservation::Run.new(seed: run_seed, steps: steps).call

      expect(run.violations).to be_empty, run.report
      expect(run.notes.values_at(:pushed, :fetched, :acks_applied)).to all(be_positive)
    end
  end
end
