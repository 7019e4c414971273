# frozen_string_literal: true

# Entry point for Bundler's auto-require of the gem name.
require "sidekiq/fair_tenant"
