# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # What the app gives Sidekiq's public Redis setter (`config.redis =`), recorded as Sidekiq keeps it: merged
      # on 7.x/8.x (Sidekiq::Config#redis=), replaced on 6.x (`Sidekiq.redis =`, a Hash or a ConnectionPool). Only
      # Sidekiq's default configuration counts. SidekiqRedis reads the gem's keys from it.
      module SidekiqRedisGiven
        @given = nil
        @version = 0

        class << self
          # A symbolized Hash, a 6.x ConnectionPool, or nil (nothing given since this file was loaded).
          attr_reader :given

          # Counts the changes, for readers that keep what they read.
          attr_reader :version

          # Specs put back what was given before them.
          def given=(value)
            @given = value
            @version += 1
          end

          def record(owner, value)
            return unless owner.equal?(sidekiq7? ? Sidekiq.default_configuration : Sidekiq)

            value = SidekiqRedis.symbolize(value) if value.is_a?(Hash)
            self.given = (sidekiq7? && @given.is_a?(Hash) && value.is_a?(Hash) ? @given.merge(value) : value)
          end

          def sidekiq7?
            Sidekiq.respond_to?(:default_configuration)
          end

          def install
            (sidekiq7? ? Sidekiq::Config : Sidekiq.singleton_class).prepend(self)
          end
        end

        def redis=(value)
          super
          SidekiqRedisGiven.record(self, value)
        end
      end
    end
  end
end

Sidekiq::FairTenant::Settings::SidekiqRedisGiven.install
