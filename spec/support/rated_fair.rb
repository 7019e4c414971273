# frozen_string_literal: true

require_relative "fair_rate_app"

# A tenant of the fair queue `fair` waiting for a rate window, built for real: jobs pushed through Sidekiq's
# client (FairQueues::Push writes each job's rate cap) and fetched in this process with FairFetch until the tenant
# "L" (2 starts in 3 s) has made its 2 starts and leaves the rotation for `rated`; "M" is uncapped.
module RatedFair
  module_function

  # Returns the fetcher and the units it served (acknowledged).
  def build(jobs: 3)
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "rated:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    jobs.times { |i| SlowRateJob.perform_async("L", i, 0) }
    UncappedRateAppJob.perform_async("M", 0, 0)
    units = Array.new(4) { fetch.retrieve_work&.tap(&:acknowledge) }.compact
    fetch.flush_acks
    [fetch, units]
  end
end
