# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # The `fair_queues` key of Config: names, as an Array or one comma-separated String; an entry may say how
      # the queue shares its workers, by job count (`jobs`, the default) or by worker time (`time`):
      # `["default", { "imports" => :time }]`, or `"default,imports:time"`.
      module Settings
        DEFAULTS = { fair_queues: [].freeze }.freeze

        # An entry that is empty, blank or no valid queue name raises ConfigurationError (a String that is blank
        # as a whole, an unset environment variable, configures none).
        def fair_queues=(value)
          list = value.is_a?(String) ? value.strip.split(",", -1) : Array(value)
          list = [] if value.is_a?(String) && value.strip.empty?
          modes = list.flat_map { |entry| fair_queue_entries(entry) }.to_h
          @fair_queues = modes.keys.freeze
          @fair_time_queues = modes.select { |_, mode| mode == Native::Names::FAIR_MODE_TIME }.keys.freeze
        end

        def fair_time_queues
          @fair_time_queues || []
        end

        private

        def fair_queue_entries(entry)
          pairs = if entry.is_a?(Hash)
                    entry.map { |queue, mode| Native::Fair.fair_queue_mode(queue.to_s, mode.to_s) }
                  else
                    [Native::Fair.parse_fair_queue(entry.to_s)]
                  end
          pairs.map { |queue, mode| [queue.freeze, mode] }
        rescue ArgumentError => e
          raise ConfigurationError, e.message
        end
      end
    end
  end
end
