# frozen_string_literal: true

# The demo's Sidekiq application, loaded by real Sidekiq processes started by bin/demo:
#   RUBYLIB=lib sidekiq -r ./demo/app.rb -c 10 -q default,4 -q throttled,1
# (the fair_fetch modes add SIDEKIQ_FAIR_TENANT_FAIR_QUEUES=default, which makes the process fetch with FairFetch;
# the fair_fetch+rules and +reroute modes work on default,6 default_throttled,3 default_superslow,1, all fair).
# Each job sleeps job_ms and records its tenant, enqueue, start and finish times, its thread and its queue in Redis.
require "json"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) # Sidekiq 6.4 calls sadd the redis-rb 4.8 way
module Demo
  RECORDS_KEY = "demo:records"
  SERVER_VERSION_KEY = "demo:server_sidekiq_version"
  THROTTLE_THRESHOLD = Integer(ENV.fetch("FAIR_TENANT_DEMO_THRESHOLD", "20"))
  # Running jobs per tenant (and original queue); bin/demo sets it from --slot-limit (threads - 1).
  SLOT_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_SLOT_LIMIT", "9"))
  # Running jobs per tenant in the capped fair_fetch modes; bin/demo sets it from --slot-limit (2).
  CAP_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_CAP_LIMIT", "2"))
  SLOT_LEASE = 60
  # The rate-capped scenario: this tenant's jobs carry a rate cap of RATE_LIMIT starts a second (--rate-limit).
  CAPPED_TENANT = "limited-shop"
  RATE_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_RATE_LIMIT", "5"))
  # The shared-api scenario: every tenant's jobs call one partner API, held to SHARED_LIMIT in flight and
  # SHARED_RATE starts a second in all (--shared-limit, --shared-rate), each tenant to CAP_LIMIT in flight.
  SHARED_LIMIT = Integer(ENV.fetch("FAIR_TENANT_DEMO_SHARED_LIMIT", "10"))
  SHARED_RATE = Integer(ENV.fetch("FAIR_TENANT_DEMO_SHARED_RATE", "20"))
  SHARED_LEASE = 30
  # The second rule of the fair_fetch+rules and +reroute modes: past this many jobs a minute, default_superslow.
  SUPERSLOW_THRESHOLD = 5 * THROTTLE_THRESHOLD
  # The queues of those modes, as a sidekiq-fair_tenant user configured them (all three fair, in those modes).
  RULE_QUEUES = { "default" => 6, "default_throttled" => 3, "default_superslow" => 1 }.freeze
  RULES = [{ queue: "default_throttled", threshold: THROTTLE_THRESHOLD, per: 60 },
           { queue: "default_superslow", threshold: SUPERSLOW_THRESHOLD, per: 60 }].freeze

  # Remembers the queue a job was fetched from, for its record.
  class QueueOf
    include ::Sidekiq::ServerMiddleware if defined?(::Sidekiq::ServerMiddleware)

    def call(_job, _payload, queue)
      Thread.current[:demo_queue] = queue
      yield
    end
  end

  # Shared body: sleep, then record.
  module Recording
    def perform(tenant, enqueued_at, job_ms)
      started_at = Time.now.to_f
      sleep(job_ms / 1000.0)
      finished_at = Time.now.to_f
      record = { tenant: tenant, enqueued_at: enqueued_at, started_at: started_at, finished_at: finished_at,
                 thread: "#{Process.pid}/#{Thread.current.object_id}", queue: Thread.current[:demo_queue] }
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

  # A sidekiq-fair_tenant user's rules kept as they were (default -> default_throttled -> default_superslow), with
  # all three queues fair: a fair queue's jobs are not re-routed unless a rule asks, so these stay in default.
  class RulesFairJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false, fair_tenant_queues: RULES.map(&:dup)
  end

  # The same rules, asked to re-route from a fair queue too (from_fair_queue: true), as before that default.
  class RerouteFairJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false,
                    fair_tenant_queues: RULES.map { |rule| rule.merge(from_fair_queue: true) }
  end

  # FairFetchJob with at most RATE_LIMIT starts in any second per tenant (and queue), on the fair queue: a tenant
  # whose next start would exceed it leaves the rotation until it may start. Only the capped tenant's jobs use it.
  class RateCappedJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false, fair_tenant_rate: [{ limit: RATE_LIMIT, per: 1 }]
  end

  # FairFetchJob calling the partner API: at most CAP_LIMIT in flight per tenant, and SHARED_LIMIT in flight and
  # SHARED_RATE starts in any second for every tenant together (the `key:` scopes: one value, one scope). A job
  # starts only when all three have room, on the fair queue.
  class SharedApiJob
    include Sidekiq::Worker
    include Recording
    sidekiq_options queue: "default", retry: false,
                    fair_tenant_concurrency: [{ limit: CAP_LIMIT, lease: SHARED_LEASE },
                                              { limit: SHARED_LIMIT, lease: SHARED_LEASE, key: :api_scope }],
                    fair_tenant_rate: { limit: SHARED_RATE, per: 1, key: :api_scope }

    def self.api_scope(*) = "partner-api"
  end

  JOBS = { "plain" => PlainJob, "fair_tenant" => FairTenantJob, "fair_tenant+slots" => FairTenantSlotsJob,
           "fair_fetch" => FairFetchJob, "fair_fetch+elastic" => FairFetchElasticJob,
           "fair_fetch+static" => FairFetchStaticJob, "fair_fetch+rules" => RulesFairJob,
           "fair_fetch+reroute" => RerouteFairJob, "fair_fetch+time" => FairFetchJob,
           "fair_fetch+rate" => FairFetchJob, "fair_fetch+shared" => SharedApiJob }.freeze
end

Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN # no start/done line per job
  config.server_middleware { |chain| chain.add Demo::QueueOf }
  config.on(:startup) { Sidekiq.redis { |conn| conn.set(Demo::SERVER_VERSION_KEY, Sidekiq::VERSION) } }
end

# Started by bin/demo: stop when bin/demo is gone, even if it was killed before it could stop us.
if (parent = ENV.fetch("FAIR_TENANT_DEMO_PARENT_PID", nil)) && Sidekiq.server?
  Thread.new do
    sleep 0.5 while Process.kill(0, Integer(parent))
  rescue Errno::ESRCH, Errno::EPERM
    Process.kill("TERM", Process.pid)
  end
end
