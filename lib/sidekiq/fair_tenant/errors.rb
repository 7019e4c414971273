# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Root of every error this gem raises from its explicit APIs (the middleware fails open).
    class Error < ::StandardError; end

    # Redis could not be reached, or the connection broke mid-call.
    class ConnectionError < Error; end

    # Connecting, reading, writing or waiting for a pooled connection took too long.
    class TimeoutError < ConnectionError; end

    # Redis answered with an error.
    class CommandError < Error; end

    # Invalid settings: Redis URL, pool size, timeouts, key format.
    class ConfigurationError < Error; end

    # The reason a fair queue's job went to the dead set: its process died while running it too often.
    class Interrupted < Error; end

    # The reason a payload in a fair queue went to the dead set: it is not a job (not a JSON object).
    class NotAJob < Error; end

    # No compiled extension for the running Ruby: a platform gem built for other Ruby versions.
    class MissingExtensionError < Error; end
  end
end
