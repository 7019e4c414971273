# frozen_string_literal: true

# The demo's Sidekiq application, loaded by real Sidekiq processes started by bin/demo:
#   RUBYLIB=lib sidekiq -r ./demo/app.rb -c 10 -q default,4 -q throttled,1
# (the fair_fetch modes add SIDEKIQ_FAIR_TENANT_FAIR_QUEUES=default, which makes the process fetch with FairFetch).
# Each job sleeps job_ms and records its tenant, enqueue, start and finish times and its thread in Redis.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) # Sidekiq 6.4 calls sadd the redis-rb 4.8 way
Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN # no start/done line per job
  config.on(:startup) { Sidekiq.redis { |conn| conn.set(Demo::SERVER_VERSION_KEY, Sidekiq::VERSION) } }
end

module Demo
  RECORDS_KEY = "demo:records"
  SERVER_VERSION_KEY = "demo:server_sidekiq_version"
  THROTTLE_THRESHOLD = Integer(ENV.fetch("FAIR_TENANT_DEMO_THRESHOLD", "20"))
  # Running jobs per tenant (and original queue); bin/demo sets it from --slot-limit (threads - 1).
  SLOT_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_SLOT_LIMIT", "9"))
  # Running jobs per tenant in the capped fair_fetch modes; bin/demo sets it from --slot-limit (2).
  CAP_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_CAP_LIMIT", "2"))
  SLOT_LEASE = 60

  # Shared body: sleep, then record.
  module Recording
    def perform(tenant, enqueued_at, job_ms)
      started_at = Time.now.to_f
      sleep(job_ms / 1000.0)
      finished_at = Time.now.to_f
      record = { tenant: tenant, enqueued_at: enqueued_at, started_at: started_at, finished_at: finished_at,
                 thread: "#{Process.pid}/#{Thread.current.object_id}" }
      Sidekiq.redis { |conn| conn.rpush(RECORDS_KEY, JSON.generate(record)) }
    end
  end

  # No re-routing: every job waits in "default", first in first out.
  class PlainJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false
  end

  # Past THROTTLE_THRESHOLD jobs a minute, a tenant's jobs go to the lower-weight "throttled" queue.
  class FairTenantJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false,
                    fair_tenant_queues: [{ queue: "throttled", threshold: THROTTLE_THRESHOLD, per: 60 }]
  end

  # Re-routing as FairTenantJob, plus at most SLOT_LIMIT running jobs per tenant: a tenant's jobs past
  # the limit are parked in Redis and handed a slot (back to the front of their queue) when one frees.
  class FairTenantSlotsJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false,
                    fair_tenant_queues: [{ queue: "throttled", threshold: THROTTLE_THRESHOLD, per: 60 }],
                    fair_tenant_concurrency: { limit: SLOT_LIMIT, lease: SLOT_LEASE }
  end

  # PlainJob's options, on a fair queue: bin/demo makes "default" a fair queue for this mode (fair_queues in
  # itself, SIDEKIQ_FAIR_TENANT_FAIR_QUEUES in Sidekiq), so a push goes to the tenant's own list and the
  # fetcher serves tenants in start-time fair order. Nothing in the job itself is about fairness.
  class FairFetchJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false
  end

  # FairFetchJob with a cap of CAP_LIMIT running jobs per tenant, elastic: the fetcher takes the slot with the
  # job; a tenant at its limit is still served while no tenant under its limit waits.
  class FairFetchElasticJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false,
                    fair_tenant_concurrency: { limit: CAP_LIMIT, lease: SLOT_LEASE, elastic: true }
  end

  # The same cap, static: a tenant at its limit leaves the rotation until one of its jobs finishes.
  class FairFetchStaticJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false, fair_tenant_concurrency: { limit: CAP_LIMIT, lease: SLOT_LEASE }
  end

  JOBS = { "plain" => PlainJob, "fair_tenant" => FairTenantJob, "fair_tenant+slots" => FairTenantSlotsJob,
           "fair_fetch" => FairFetchJob, "fair_fetch+elastic" => FairFetchElasticJob,
           "fair_fetch+static" => FairFetchStaticJob }.freeze
end

# Started by bin/demo: stop when bin/demo is gone, even if it was killed before it could stop us.
if (parent = ENV.fetch("FAIR_TENANT_DEMO_PARENT_PID", nil)) && Sidekiq.server?
  Thread.new do
    sleep 0.5 while Process.kill(0, Integer(parent))
  rescue Errno::ESRCH, Errno::EPERM
    Process.kill("TERM", Process.pid)
  end
end
