# frozen_string_literal: true

module Demo
  # The ideal of the shared-api scenario, which the extension's simulator (Native::Fair.simulate: no concurrency
  # limits, rate windows per tenant only) cannot model: the mode's jobs (enqueue times, measured durations) in
  # start-time fair order (weights 1) on `threads` threads, a job starting only while its tenant has fewer than
  # limits[:tenant] in flight, all tenants together fewer than limits[:shared], and fewer than limits[:rate] starts
  # in the last second (an exact sliding window). Never idle while a job could start. A tenant at its limit keeps
  # its place and is back at max(its tag, V). Returns copies of the records with the simulated start and finish.
  module SharedIdeal
    EPS = 1e-9

    module_function

    def run(records, threads, limits)
      return [] if records.empty?

      origin = records.map { |r| r["enqueued_at"] }.min
      jobs = records.map do |r|
        [r["tenant"], r["enqueued_at"] - origin, [r["finished_at"] - r["started_at"], 0.0].max]
      end
      sim = Sim.new(jobs, [threads, limits[:shared]].min, limits[:tenant], limits[:rate])
      records.zip(jobs, sim.starts).map do |r, (_, _, duration), start|
        # origin + (start + duration): the finish the simulation used, so a job started at it does not overlap.
        r.merge("started_at" => origin + start, "finished_at" => origin + (start + duration))
      end
    end

    # The event loop: arrivals, finishes and the rate window's next opening.
    class Sim
      def initialize(jobs, slots, tenant_limit, rate, per = 1.0)
        @jobs = jobs
        @slots = slots
        @tenant_limit = tenant_limit
        @rate = rate
        @per = per
        @arrivals = jobs.each_index.sort_by { |i| [jobs[i][1], i] }
        @backlog = Hash.new { |h, t| h[t] = [] }
        @tags = {} # backlogged tenants: [start tag, activation]
        @finish = {} # start tags of tenants that went idle
        @running = [] # [end, tenant]
        @in_flight = Hash.new(0)
        @window = [] # recent starts
        @v = 0.0
        @seq = 0
      end

      def starts
        out = Array.new(@jobs.size)
        now = @jobs[@arrivals.first][1]
        while now
          step(now, out)
          now = next_event
        end
        out
      end

      private

      def step(now, out)
        arrive(@arrivals.shift) while arrived?(now)
        finish(now)
        @window.shift while @window.any? && @window.first <= now - @per + EPS
        while room? && (tenant = pick)
          out[start(tenant, now)] = now
        end
      end

      def finish(now)
        done, @running = @running.partition { |at, _| at <= now + EPS }
        done.map(&:last).each { |tenant| @in_flight[tenant] -= 1 }
      end

      def arrived?(now) = @arrivals.any? && @jobs[@arrivals.first][1] <= now + EPS
      def room? = @running.size < @slots && @window.size < @rate

      def arrive(job)
        tenant = @jobs[job][0]
        @backlog[tenant] << job
        return unless @backlog[tenant].size == 1

        @tags[tenant] = [[@finish.delete(tenant) || @v, @v].max, @seq += 1]
      end

      # The backlogged tenant under its limit with the lowest place (a tag behind V counts as V).
      def pick
        @tags.select { |t, _| @in_flight[t] < @tenant_limit }.min_by { |_, (tag, seq)| [[tag, @v].max, seq] }&.first
      end

      def start(tenant, now)
        tag, seq = @tags.fetch(tenant)
        @v = [tag, @v].max
        job = @backlog[tenant].shift
        if @backlog[tenant].empty?
          @tags.delete(tenant)
          @finish[tenant] = @v + 1
        else
          @tags[tenant] = [@v + 1, seq]
        end
        @in_flight[tenant] += 1
        @running << [now + @jobs[job][2], tenant]
        @window << now
        job
      end

      def next_event
        opens = @window.size >= @rate ? @window.first + @per : nil
        [@arrivals.first && @jobs[@arrivals.first][1], @running.map(&:first).min, opens].compact.min
      end
    end
  end
end
