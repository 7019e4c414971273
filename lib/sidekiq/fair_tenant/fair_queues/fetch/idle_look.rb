# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # Whether a fetching thread runs the fetch script before blocking. Always, unless its last wait timed
        # out (its ThreadStates::State is idle: nothing was pushed meanwhile, a push leaves a wake-up token): then
        # only one idle thread per process per INTERVAL looks, for jobs that arrived without a token (pushed to
        # queue:<name> directly, to be adopted). An idle server thus sends about one BRPOP per thread per
        # TIMEOUT, as BasicFetch.
        module IdleLook
          INTERVAL = 1.0
          PACE = Interval.new(INTERVAL)

          module_function

          def look_first?(state)
            !state.idle || PACE.due?
          end
        end
      end
    end
  end
end
