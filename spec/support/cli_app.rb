# frozen_string_literal: true

# Loaded by the CLI specs through `sidekiq-fair_tenant -r`: the app's job classes.
require "active_support"
require "active_support/core_ext/numeric/time"
require "sidekiq"
require_relative "jobs"
