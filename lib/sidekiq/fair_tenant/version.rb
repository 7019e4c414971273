# frozen_string_literal: true

module Sidekiq
  module FairTenant
    VERSION = "0.1.0"
  end
end
