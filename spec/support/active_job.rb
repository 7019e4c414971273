# frozen_string_literal: true

require "active_job"

ActiveJob::Base.queue_adapter = :sidekiq
ActiveJob::Base.logger = Logger.new(nil)
# What sidekiq/rails does in a Rails app: let ActiveJob classes declare sidekiq_options.
ActiveJob::Base.include(Sidekiq::Worker::Options) unless ActiveJob::Base.respond_to?(:sidekiq_options)
