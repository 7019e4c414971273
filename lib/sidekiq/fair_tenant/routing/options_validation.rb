# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Routing
      # Validates `fair_tenant_queues`, `fair_tenant_concurrency` and `fair_tenant_rate` when a class declares them, so
      # a bad value fails at boot with an ArgumentError naming the class and the rule, not on some later push or
      # perform.
      module OptionsValidation
        def sidekiq_options(opts = {})
          rules = opts[:fair_tenant_queues] || opts["fair_tenant_queues"]
          Native::RuleSet.new(name || inspect, rules, FairTenant.config.max_throttling_window) unless rules.nil?
          OptionsValidation.check_caps(name || inspect, opts)
          super
        end

        def self.check_caps(class_name, opts)
          concurrency = opts[:fair_tenant_concurrency] || opts["fair_tenant_concurrency"]
          Native::Concurrency.list(class_name, concurrency) unless concurrency.nil?
          rate = opts[:fair_tenant_rate] || opts["fair_tenant_rate"]
          Native::Rate.list(class_name, rate) unless rate.nil?
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
end
