# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # The `fair_queues` key of Config: names, as an Array or one comma-separated String; an entry may say how
      # the queue shares its workers, by job count (`jobs`, the default) or by worker time (`time`):
      # `["default", { "imports" => :time }]`, or `"default,imports:time"`.
      module Settings
        DEFAULTS = { fair_queues: [].freeze }.freeze

        def fair_queues=(value)
          list = value.is_a?(String) ? value.split(",") : Array(value)
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
                  elsif entry.to_s.strip.empty?
                    []
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
