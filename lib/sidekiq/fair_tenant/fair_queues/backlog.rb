# frozen_string_literal: true

require "set"

module Sidekiq
  module FairTenant
    module FairQueues
      # A fair queue's waiting jobs as Sidekiq's API and Web UI see them (Visibility): listed tenant by
      # tenant, in the order of their oldest waiting job, each tenant's jobs oldest first; deleted with the
      # scheduling state kept as when a job is served; and the queue's latency as a free thread sees it.
      module Backlog
        PAGE = 100 # jobs per round trip when listing
        MAX_PAGE = 1000 # jobs per round trip for a Web page (its size is a URL parameter)
        STEPS = 1000 # tenants looked at per round trip when listing, or passed over for the latency
        SCAN = 100 # tenants whose lists one round trip of a delete looks through (ZSCAN's COUNT)
        SEARCH = 2000 # members one round trip of a delete looks through for a tenant's place (its only job goes)
        CAPPED_READ = 1000 # capped tenants the latency reads; past them it looks at a tenant's scope
        HELD_MAX = 10_000 # paused, capped and over tenants whose jobs the stats count, per set
        START = ["", "", 0, 0].freeze # a walk's cursor (score, tenant, offset, length) before the first tenant

        module_function

        # Yields each waiting job of the queue's fair backlog with its tenant: `PAGE` jobs per round trip.
        # A tenant whose oldest job moves past where the walk is (it was served meanwhile) is not listed twice.
        def each(queue)
          cursor = START
          finished = Set.new
          loop do
            reply = Sidekiq.redis { |conn| walk(conn, queue, PAGE, 0, cursor) }
            jobs = reply.drop(5).each_slice(2).to_a
            jobs.each { |tenant, job| yield tenant, job unless finished.include?(tenant) }
            return unless (cursor = advance(finished, cursor, reply, jobs))
          end
        end

        # Tenants read to their end join `finished`; the one the walk stops in does not, unless it had (met
        # again further on). The next cursor, nil at the end.
        def advance(finished, cursor, reply, jobs)
          reading = reply[0] && !finished.include?(reply[1]) && reply[1]
          finished.merge(jobs.map(&:first))
          finished << cursor[1] unless cursor[0].empty?
          return nil unless reply[0]

          finished.delete(reading) if reading
          next_cursor(reply)
        end

        def next_cursor(reply)
          [reply[0].to_s, reply[1], reply[2].to_i, reply[3].to_i]
        end

        # Up to `max` jobs after the first `skip` ones, in the order `each` yields them (`MAX_PAGE` per round trip).
        def jobs(conn, queue, skip, max)
          found = []
          cursor = START
          while found.size < max
            reply = walk(conn, queue, [max - found.size, MAX_PAGE].min, skip, cursor)
            found.concat(reply.drop(5).each_slice(2).map(&:last))
            return found unless reply[0]

            skip = reply[4].to_i
            cursor = next_cursor(reply)
          end
          found
        end

        def walk(conn, queue, max, skip, cursor)
          ScriptRunner.run(conn, "jobs", [], [FairQueues.base(queue), max, STEPS, skip, *cursor])
        end

        # Sidekiq::Paginator#page for a queue with a fair backlog: Sidekiq's own list first (newest first, as
        # Sidekiq shows it), then the fair backlog; `reverse` (the page's ascending order): the fair backlog
        # first, then Sidekiq's list oldest first.
        def page(queue, pageidx, page_size, reverse)
          current = [pageidx.to_i, 1].max
          start = (current - 1) * page_size
          Sidekiq.redis do |conn|
            plain = conn.call("LLEN", "queue:#{queue}").to_i
            fair = FairQueues.backlog(conn, queue)
            items = if reverse
                      fair_first(conn, queue, start, page_size, fair)
                    else
                      plain_first(conn, queue, start, page_size, plain)
                    end
            [current, plain + fair, items]
          end
        end

        def plain_first(conn, queue, start, size, plain)
          items = start < plain ? conn.call("LRANGE", "queue:#{queue}", start, [start + size, plain].min - 1) : []
          items + jobs(conn, queue, [start - plain, 0].max, size - items.size)
        end

        def fair_first(conn, queue, start, size, fair)
          items = start < fair ? jobs(conn, queue, start, size) : []
          return items if items.size == size

          skip = [start - fair, 0].max
          rest = size - items.size
          items + conn.call("LRANGE", "queue:#{queue}", -skip - rest, -skip - 1).reverse
        end

        # Deletes one waiting job (its exact payload) from the queue's fair backlog: looked for in `tenant`'s
        # list first, then in every tenant's, `SCAN` tenants per round trip; a tenant's only job goes once its
        # place in the rotation is found, `SEARCH` members looked through per round trip. True when deleted.
        def delete(queue, job, tenant)
          cursor = "0"
          search = []
          Sidekiq.redis do |conn|
            loop do
              argv = [FairQueues.base(queue), queue, job, tenant, cursor, SCAN, SEARCH, *search]
              found, *rest = ScriptRunner.run(conn, "delete", [], argv)
              return true if found.to_i == 1

              if found.to_i == 2 # the search for the tenant's place goes on
                tenant, *search = rest
                next
              end
              return false if rest[0] == "0" || search.any?

              cursor = rest[0]
            end
          end
        end

        # Seconds the oldest job a free thread could start now has waited (paused tenants and tenants behind a
        # static cap left out); 0.0 when none waits.
        def latency(conn, queue, capped_read: CAPPED_READ)
          oldest = ScriptRunner.run(conn, "latency", [FairQueues::WEIGHTS_KEY],
                                    [FairQueues.base(queue), queue, STEPS, capped_read])
          oldest ? [Time.now.to_f - oldest.to_f, 0.0].max : 0.0
        end

        # Waiting jobs by what a free thread may do with them: start (`startable`, elastic over-limit tenants'
        # included), not while their tenant is paused (`paused`), not while a static cap holds it (`held`), not
        # before a rate window lets it (`rate_held`). backlog = startable + paused + held + rate_held.
        def counts(conn, queue, backlog)
          paused, _, held, _, _, _, rated, rated_tenants =
            ScriptRunner.run(conn, "held", [], [FairQueues.base(queue), HELD_MAX]).map(&:to_i)
          { startable: [backlog - paused - held - rated, 0].max, paused: paused, held: held, rate_held: rated,
            rated_tenants: rated_tenants }
        end
      end
    end
  end
end
