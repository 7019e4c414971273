# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # The fetch script's reply (fair/fetch.lua), read: the jobs it served (Served), in the wants' order, and
        # what the caller does next. The script replies one flat array (each element costs the client time to read).
        Reply = Struct.new(:served, :starved, :later, :soonest, :empty) do
          def self.read(raw)
            starved, soonest, empty, later, *triples = raw
            later = triples.shift(later)
            new(triples.each_slice(3).map { |field, job, extras| served(field, job, extras) }, starved, later, soonest,
                empty == 1)
          end

          def self.served(field, job, extras)
            return Served.new(extras.byteslice(1, extras.bytesize - 1), nil, job, nil, "", "", "") if extras[0] == "P"

            queue, tenant, = Native::Fair.decode_entry(field)
            held = Native::Fair.served_extras(extras) || Served::NONE
            Served.new(queue, tenant, job, field, *held)
          end
        end
      end
    end
  end
end
