# frozen_string_literal: true

# Loaded by the `sidekiq` processes of bin/bench's drain table (bench/drain.rb), and by the bench itself.
require_relative "perform_app"

# A no-op job (one INCR) carrying its tenant and a filler as arguments: args [index, tenant, filler].
class BenchDrainJob < BenchNoopJob
  def self.fair_tenant(_index, tenant, *) = tenant
end
