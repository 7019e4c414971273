# frozen_string_literal: true

# Rake tasks. In a Rakefile: `require "sidekiq/fair_tenant/tasks"` (Rails apps get the
# `:environment` prerequisite and eager loading, so every job class is found).
require "rake"

namespace :fair_tenant do
  desc "Print the weighted Sidekiq :queues: block implied by every job class's fair_tenant_queues"
  task queues: (Rake::Task.task_defined?(:environment) ? [:environment] : []) do
    Rails.application.eager_load! if defined?(Rails) && Rails.respond_to?(:application) && Rails.application
    require "sidekiq/fair_tenant"
    puts Sidekiq::FairTenant::Routing::QueueConfig.yaml
  end

  desc "Switch fair fetch off for QUEUE: move its fair backlog back to queue:QUEUE in fair order " \
       "(after every process runs without it in fair_queues)"
  task :fair_off, [:queue] => (Rake::Task.task_defined?(:environment) ? [:environment] : []) do |_task, args|
    require "sidekiq/fair_tenant"
    queue = args[:queue] or abort("usage: rake fair_tenant:fair_off[QUEUE]")
    off = Sidekiq::FairTenant::FairQueues::Off
    result = Sidekiq.redis { |conn| off.run(conn, queue, on_wait: off.method(:waiting).curry[$stdout]) }
    puts off.note(queue, result)
  end
end
