# frozen_string_literal: true

# What bench/longest.rb sets up for an operation besides the backlog.
module LongestSetups
  module_function

  def redis = FairBench.redis

  # {name => operation} of what users run on a fair queue, in the order they run.
  def operations(queue, tenants, in_flight)
    reads(queue, tenants).merge(writes(queue, tenants, in_flight))
  end

  def reads(queue, tenants)
    stats = Sidekiq::FairTenant.fair_stats
    { "stats (fair_stats.queues, .queue)" => -> { [stats.queues, stats.queue(queue)] },
      "fair_stats.queue, 1,000 tenants from the middle" =>
        -> { stats.queue(queue, offset: tenants / 2, limit: 1_000, capped_limit: 1_000) },
      "Queue#size, #latency" => -> { Sidekiq::Queue.new(queue).then { |q| [q.size, q.latency] } },
      "Queue#each, the first 10,000 jobs" => -> { Sidekiq::Queue.new(queue).first(10_000) },
      "Web queue page 4,000 (25 a page)" => lambda {
        Sidekiq::FairTenant::FairQueues::Backlog.page(queue, 4_000, 25, false)
      } }
  end

  def writes(queue, tenants, in_flight)
    { "resume a paused tenant (weight 1)" => -> { Sidekiq::FairTenant.weights.set(1, tenant: "t0") },
      "recover a dead process (#{in_flight} in flight)" => -> { recover(queue, in_flight) },
      "push (100 single jobs)" => -> { push(queue, 100) },
      "fetch + ack (500 jobs, FairFetch)" => -> { fetch_and_ack(queue, 500) },
      "adopt (1,000 jobs from queue:<name>)" => -> { adopt(queue, tenants, 1_000) },
      "delete, tenant known" => -> { delete(queue, "t#{tenants - 1}", "t#{tenants - 1}") },
      "delete, tenant unknown (scan)" => -> { delete(queue, "t#{tenants - 2}", "nobody") },
      "delete, a tenant's only job" => -> { delete_only(queue) },
      "fair-off drain (FairQueues.drain)" =>
        -> { Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.drain(conn, queue) } } }
  end

  def push(queue, count)
    count.times do |i|
      Sidekiq::Client.push("class" => "BenchFairJob", "queue" => queue, "args" => [i], "fair_tenant" => "t#{i}")
    end
  end

  # Deletes the last job of `owner` (Sidekiq::JobRecord#delete's path), looked for in `tenant`'s list first.
  def delete(queue, owner, tenant)
    base = Sidekiq::FairTenant::FairQueues.base(queue)
    job = redis.lindex("#{base}#{Sidekiq::FairTenant::Native::Names::TENANT_LIST}#{owner}", -1)
    Sidekiq::FairTenant::FairQueues::Backlog.delete(queue, job, tenant)
  end

  # A new tenant's only job pushed, then deleted: its place among every tenant's in the rotation is searched.
  def delete_only(queue)
    job = format('{"class":"BenchFairJob","queue":"%s","args":[0],"jid":"solo"}', queue)
    Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.push(conn, queue, [["solo", job]]) }
    Sidekiq::FairTenant::FairQueues::Backlog.delete(queue, job, "solo")
  end

  def fetch_and_ack(queue, count)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [queue])
    count.times { fetch.retrieve_work&.acknowledge }
    fetch.flush_acks
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop
  end

  def adopt(queue, tenants, count)
    raw = '{"class":"BenchFairJob","queue":"%s","args":[%d],"jid":"a%d","fair_tenant":"t%d"}'
    redis.lpush("queue:#{queue}", Array.new(count) { |i| format(raw, queue, i, i, i % tenants) })
    batch = Sidekiq::FairTenant::FairFetch::ADOPT_BATCH
    Sidekiq.redis do |conn|
      loop { break unless Sidekiq::FairTenant::FairQueues.adopt(conn, queue, batch).positive? }
    end
  end

  # A process that fetched `count` jobs of `queue` and died: its heartbeat never written, found gone by one
  # sweep and recovered by the next once Recovery::LAPSE seconds have passed (the suspicion's time moved back).
  def recover(queue, count)
    recovery = Sidekiq::FairTenant::FairQueues::Recovery
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: [queue] }, "bench-dead:1:#{rand(1 << 30)}")
    count.times { fetch.retrieve_work }
    Sidekiq::FairTenant::Concurrency::Slots.stop
    Sidekiq.redis do |conn|
      recovery.sweep(conn)
      redis.hgetall(recovery::SUSPECTS).each { |id, since| redis.hset(recovery::SUSPECTS, id, since.to_f - 3600) }
      recovery.sweep(conn)
    end
  end

  # `count` tenants' concurrency scopes, each with a holder whose lease (1 ms) expired and a parked job.
  def expired_scopes(count)
    slot = Sidekiq::FairTenant::ServerMiddleware::Slot
    names = Sidekiq::FairTenant::Native::Names
    count.times do |i|
      %w[a b].each do |run| # a holds the slot, b is parked
        job = { "class" => "BenchFairJob", "queue" => "bench_slots", "args" => [i], "jid" => "#{run}#{i}" }
        scope = slot.new("#{names::TENANT_TAG}s#{i}", "#{names::QUEUE_SUB}bench_slots", job["jid"], 1, 1, run)
        Sidekiq::FairTenant::Concurrency::SlotCalls.acquire(scope, JSON.generate(job), Time.now.to_f)
      end
    end
    sleep 0.01
  end
end
