# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Validates `fair_tenant_queues` when a class declares it, so a bad rule fails at boot with
    # an ArgumentError naming the class and the rule, not on some later push.
    module OptionsValidation
      def sidekiq_options(opts = {})
        raw = opts[:fair_tenant_queues] || opts["fair_tenant_queues"]
        Native::RuleSet.new(name || inspect, raw, FairTenant.config.max_throttling_window) unless raw.nil?
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
