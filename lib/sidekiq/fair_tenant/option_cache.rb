# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Parsed `fair_tenant_queues` rules. A push straight from a class hands over the very Array
    # object of its sidekiq_options, so the common case is an identity check; JSON re-pushes
    # (scheduler, retries) are looked up by value. Bounded: cleared past MAX_ENTRIES.
    class RuleCache
      MAX_ENTRIES = 1_000
      Entry = Struct.new(:raw, :window, :rule_set)

      def initialize
        @by_class = {}
        @by_value = {}
      end

      # Raises ArgumentError naming the class and the rule when `raw` is invalid.
      def fetch(class_name, raw, window)
        entry = @by_class[class_name]
        return entry.rule_set if entry && entry.raw.equal?(raw) && entry.window == window

        key = [class_name, raw, window]
        rule_set = @by_value[key] ||= begin
          clear if @by_value.size >= MAX_ENTRIES
          Native::RuleSet.new(class_name, raw, window)
        end
        @by_class[class_name] = Entry.new(raw, window, rule_set)
        rule_set
      end

      def clear
        @by_class = {}
        @by_value = {}
      end
    end
  end
end
