# frozen_string_literal: true

module Demo
  # One pass over a run's enqueues, starts and finishes (SharedLines' figures): the time some tenant under its own
  # limit had a job waiting (so only the shared limits could hold it), how much of that time the API had `shared`
  # in flight and its mean in flight; and each start's fair share, split evenly among the tenants with a job waiting.
  class SharedSweep
    ORDER = { finish: 0, enqueue: 1, start: 2 }.freeze

    attr_reader :waited, :full, :busy, :fair, :got

    def self.run(records, tenant_limit, shared)
      new(tenant_limit, shared).tap { |s| events(records).each { |at, kind, tenant| s.step(at, kind, tenant) } }
    end

    # [at, kind, tenant], in time order; at one instant finishes, then enqueues, then starts.
    def self.events(records)
      events = records.flat_map do |r|
        [[r["enqueued_at"], :enqueue, r["tenant"]], [r["started_at"], :start, r["tenant"]],
         [r["finished_at"], :finish, r["tenant"]]]
      end
      events.sort_by { |at, kind, _| [at, ORDER[kind]] }
    end

    def initialize(tenant_limit, shared)
      @tenant_limit = tenant_limit
      @shared = shared
      @waiting = Hash.new(0)
      @running = Hash.new(0)
      @in_flight = 0
      @last = nil
      @waited = @full = @busy = 0.0
      @fair = Hash.new(0.0)
      @got = Hash.new(0)
    end

    def step(at, kind, tenant)
      backlogged = @waiting.keys.select { |t| @waiting[t].positive? }
      advance(at, backlogged.any? { |t| @running[t] < @tenant_limit })
      count_start(tenant, backlogged) if kind == :start
      apply(kind, tenant)
    end

    # The time-weighted share of `waited` at the limit, the mean in flight then.
    def at_limit = @waited.positive? ? @full / @waited : 0.0
    def mean_in_flight = @waited.positive? ? @busy / @waited : 0.0

    # A class's starts over its fair share (`of`: a tenant's class), nil if it had none; and each tenant's of that
    # class that had at least one start's fair share.
    def ratio(of, klass)
      fair = @fair.select { |t, _| of.call(t) == klass }
      total = fair.values.sum
      total.positive? ? fair.keys.sum { |t| @got[t] } / total : nil
    end

    def ratios(of, klass) = @fair.filter_map { |t, f| @got[t] / f if of.call(t) == klass && f >= 1 }

    private

    def advance(at, eligible)
      dt = @last ? at - @last : 0.0
      @last = at
      return unless eligible

      @waited += dt
      @busy += dt * @in_flight
      @full += dt if @in_flight >= @shared
    end

    def count_start(tenant, backlogged)
      return unless backlogged.include?(tenant)

      @got[tenant] += 1
      backlogged.each { |t| @fair[t] += 1.0 / backlogged.size }
    end

    def apply(kind, tenant)
      case kind
      when :enqueue then @waiting[tenant] += 1
      when :start
        @waiting[tenant] -= 1
        @running[tenant] += 1
        @in_flight += 1
      else
        @running[tenant] -= 1
        @in_flight -= 1
      end
    end
  end
end
