# frozen_string_literal: true

module Conservation
  # Steps of a Run on settings: weights, limits, refused writes, fair-off/on.
  module SettingSteps
    private

    def weight
      tenant = WEIGHTED_TENANTS.sample(random: rng)
      queue = [nil, nil, "fair", "fair2"].sample(random: rng)
      value = [0, 0, 0.5, 1, 2, 5, :delete].sample(random: rng)
      weights = Sidekiq::FairTenant.weights
      value == :delete ? weights.delete(tenant: tenant, queue: queue) : weights.set(value, tenant: tenant, queue: queue)
      "weight #{tenant}#{"/#{queue}" if queue} #{value}"
    end

    # A runtime limit for a tenant's scope in `fair`, or (one in four) for the scope every tenant shares.
    def limit
      target = rng.rand(4).zero? ? { key: SHARED_KEY } : { tenant: CAPPED_TENANTS.sample(random: rng), queue: "fair" }
      value = [0, 1, 2, 3, :delete].sample(random: rng)
      limits = Sidekiq::FairTenant.limits
      handed = value == :delete ? limits.delete(**target) : limits.set(value, **target)
      "limit #{target.values.join("/")} #{value} (#{handed} handed)"
    end

    # Writes refused for one operation (as on a replica left without its replicas): it raises, and the
    # harness goes on as Sidekiq's processor would.
    def refused
      kind = %i[fetch flush push requeue sweep weight].sample(random: rng)
      process = %i[fetch flush sweep].include?(kind) ? random_process : nil
      min_replicas_to_write(1)
      @refusing = true
      line = begin
        process ? send(kind, process) : send(kind)
      rescue StandardError => e
        "#{kind}#{" by #{process.identity}" if process} raised #{e.class}: #{e.message[0, 60]}"
      ensure
        @refusing = false
        min_replicas_to_write(0)
      end
      "refused writes: #{line}"
    end

    def min_replicas_to_write(count)
      sidekiq_redis { |conn| conn.call("CONFIG", "SET", "min-replicas-to-write", count.to_s) }
    end

    # Fair fetch off for `fair` (its backlog drained to queue:fair, fetched as a plain queue), or back on.
    def toggle_fair
      if @fair_on
        configure_fair(%w[fair2])
        moved = sidekiq_redis { |conn| Sidekiq::FairTenant::FairQueues.drain(conn, "fair", batch: 7) }
        "fair-off fair (#{moved} drained)"
      else
        configure_fair(%w[fair fair2])
        "fair-on fair"
      end
    end

    def configure_fair(names)
      Sidekiq::FairTenant.configure { |c| c.fair_queues = names }
      @fair_on = names.include?("fair")
    end
  end
end
