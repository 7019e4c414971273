# frozen_string_literal: true

require "active_job"
# Sidekiq 7.3.9+ ships its own ActiveJob adapter, whose job wrapper sidekiq/rails defines (as in a Rails app);
# older Sidekiqs use the adapter inside ActiveJob.
require "sidekiq/rails" if Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7.3.9")

ActiveJob::Base.queue_adapter = :sidekiq
ActiveJob::Base.logger = Logger.new(nil)
# What sidekiq/rails's initializer does in a Rails app: let ActiveJob classes declare sidekiq_options.
ActiveJob::Base.include(Sidekiq::Worker::Options) unless ActiveJob::Base.respond_to?(:sidekiq_options)
