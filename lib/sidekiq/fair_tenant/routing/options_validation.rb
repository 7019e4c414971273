# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Validates `fair_tenant_queues` and `fair_tenant_concurrency` when a class declares them, so a
    # bad value fails at boot with an ArgumentError naming the class and the rule, not on some
    # later push or perform.
    module OptionsValidation
      def sidekiq_options(opts = {})
        rules = opts[:fair_tenant_queues] || opts["fair_tenant_queues"]
        Native::RuleSet.new(name || inspect, rules, FairTenant.config.max_throttling_window) unless rules.nil?
        concurrency = opts[:fair_tenant_concurrency] || opts["fair_tenant_concurrency"]
        Native::Concurrency.new(name || inspect, concurrency) unless concurrency.nil?
        super
      end

      def self.install
        targets = []
        targets << ::Sidekiq::Job::Options::ClassMethods if defined?(::Sidekiq::Job::Options::ClassMethods)
        targets << ::Sidekiq::Worker::Options::ClassMethods if defined?(::Sidekiq::Worker::Options::ClassMethods)
        targets.uniq.each { |mod| mod.prepend(self) unless mod.ancestors.include?(self) }
      end
    end
  end
end
