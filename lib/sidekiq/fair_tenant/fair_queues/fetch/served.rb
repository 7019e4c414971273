# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # A job the fetch script served: from a fair queue with its in-flight field (`entry`: what acknowledges it;
        # `held`: the jid whose slot it took, or ""; `charged`, `member`: under `time`, what its timing names, else
        # ""); from a plain queue tenant and entry are nil.
        Served = Struct.new(:queue, :tenant, :job, :entry, :held, :charged, :member)
        Served::NONE = ["", "", ""].freeze
      end
    end
  end
end
