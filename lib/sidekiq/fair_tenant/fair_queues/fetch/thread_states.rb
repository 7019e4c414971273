# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # What a fetcher remembers of each thread that fetches through it between two of its `retrieve_work` calls
        # (State). Sidekiq's processor threads each fetch through one fetcher; a thread that ended is forgotten
        # when the next new one comes.
        class ThreadStates
          # `idle`: the thread's last wait timed out (IdleLook). `adopt`: a fair queue whose `queue:<name>` list
          # the thread's next call adopts jobs from (the script said so while it served a job: the job starts
          # first).
          State = Struct.new(:idle, :adopt)

          def initialize
            @mutex = Mutex.new
            @states = {}.compare_by_identity
          end

          # The state of `thread` (a new one for a thread seen the first time).
          def [](thread)
            @mutex.synchronize do
              @states[thread] ||= begin
                @states.delete_if { |known, _| !known.alive? }
                State.new(false, nil)
              end
            end
          end
        end
      end
    end
  end
end
