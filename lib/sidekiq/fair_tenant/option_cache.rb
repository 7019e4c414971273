# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Parsed per-class options (`fair_tenant_queues`, `fair_tenant_concurrency`). A push or
    # perform straight from a class hands over the very object of its sidekiq_options, so the
    # common case is an identity check; JSON payloads (re-pushes, fetched jobs) are looked up by
    # value. Bounded: cleared past MAX_ENTRIES.
    class OptionCache
      MAX_ENTRIES = 1_000
      Entry = Struct.new(:raw, :context, :parsed)

      # The block parses `(class_name, raw, context)` and raises ArgumentError when invalid.
      def initialize(&parser)
        @parser = parser
        clear
      end

      def fetch(class_name, raw, context = nil)
        entry = @by_class[class_name]
        return entry.parsed if entry && entry.raw.equal?(raw) && entry.context == context

        key = [class_name, raw, context]
        parsed = @by_value[key] ||= begin
          clear if @by_value.size >= MAX_ENTRIES
          @parser.call(class_name, raw, context)
        end
        @by_class[class_name] = Entry.new(raw, context, parsed)
        parsed
      end

      def clear
        @by_class = {}
        @by_value = {}
      end
    end
  end
end
