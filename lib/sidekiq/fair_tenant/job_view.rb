# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # One job's class, perform arguments and tenant (JobInfo's rules), each worked out at most once. Routing, the
    # slot scope and the fair push of one push share one view: the client middleware keeps the view of a job
    # bound for a fair queue (per thread, by the payload's identity) and FairQueues::Push takes it, so a push asks a
    # class's `fair_tenant` once and deserializes ActiveJob arguments once.
    class JobView
      KEPT = :sidekiq_fair_tenant_job_views
      MAX_KEPT = 10_000 # views of pushes a later middleware stopped are dropped past this

      class << self
        def keep(view)
          views = Thread.current[KEPT] ||= {}.compare_by_identity
          views.clear if views.size >= MAX_KEPT
          views[view.job] = view
        end

        # The view kept for this very payload, or a new one.
        def take(payload)
          Thread.current[KEPT]&.delete(payload) || new(payload["class"], payload)
        end

        # After a push: what it did not take belongs to no push any more.
        def forget
          Thread.current[KEPT]&.clear
        end
      end

      attr_reader :job

      def initialize(worker, job)
        @worker = worker
        @job = job
      end

      def klass
        return @klass if defined?(@klass)

        @klass = JobInfo.job_class(@worker, @job)
      end

      # Whether the class was looked up: a view that did not get that far holds nothing worth keeping.
      def resolved?
        defined?(@klass) ? true : false
      end

      def class_name
        @class_name ||= JobInfo.class_name(@worker, @job)
      end

      def arguments
        return @arguments if defined?(@arguments)

        @arguments = JobInfo.arguments(klass, @job)
      end

      def default_queue
        JobInfo.default_queue(klass, @job) { arguments }
      end

      # The payload's `fair_tenant` as it is now (a later middleware may set it), else the one derived once.
      def tenant
        given = JobInfo.given_tenant(@job)
        return given if given
        return @derived if defined?(@derived)

        @derived = JobInfo.derived_tenant(klass, @job) { arguments }
      end
    end
  end
end
