# frozen_string_literal: true

module Conservation
  # Steps of a Run on a slow Redis: a call that ran but whose reply was lost, sent again by the client (redis-rb
  # 4.8's and redis-client's one retry), and the process's audit of its own in-flight list that puts back what
  # such a fetch left there with no thread to run it.
  module FaultSteps
    RESENT = %i[fetch flush requeue sweep weight toggle_fair].freeze
    GARBAGE = ["garbage-%d not json \xff\xfe".b, '["garbage-%d"]', '{"garbage-%d":', "\"garbage-%d\""].freeze

    private

    # A payload that is no job, pushed raw by another client.
    def garbage
      id = "garbage-#{@jobs.size}"
      queue = %w[fair fair2].sample(random: rng)
      payload = format(GARBAGE.sample(random: rng), @jobs.size)
      @jobs[id] = Job.new(id: id, queue: queue, pushed: true, garbage: true)
      @open << id
      sidekiq_redis { |conn| conn.call("LPUSH", "queue:#{queue}", payload) }
      "garbage #{id} (#{payload.inspect}) to queue:#{queue}"
    end

    # One step whose every script call runs twice, the caller seeing the second reply.
    def resent(kind = RESENT.sample(random: rng))
      process = random_process
      return "resent: no process" unless process

      line = nil
      lost = Resend.during { line = %i[fetch flush].include?(kind) ? send(kind, process) : send(kind) }
      lost.each { |name, reply| lost_reply(process, name, reply) }
      @notes[:resent] += 1
      "resent (#{lost.size} call(s) ran twice, their first replies lost): #{line}"
    end

    # A lost fetch reply: a fair job stays in the fetching process's in-flight list with nothing to run it (the
    # audit puts it back); a plain job popped by it is gone, as with Sidekiq's BasicFetch.
    def lost_reply(process, name, reply)
      return unless name == "fetch" && reply.is_a?(Array)

      Sidekiq::FairTenant::FairFetch::Reply.read(reply).served.each do |served|
        if served.entry
          process.leaked << served.entry.b
          @notes[:stranded_by_lost_reply] += 1
        elsif (held = @jobs[RedisView.id_of(served.job)])
          held.lost_ok = true # BasicFetch's RPOP: a lost reply loses the job
          @notes[:plain_lost_by_lost_reply] += 1
        end
      end
    end

    # The process's audit of its own list, twice (an entry goes back only when orphaned at two audits in a
    # row): what no unit and no pending ack of it stands for goes back to the front of its tenant.
    def audit(process = random_process)
      return "audit: no process" unless process

      ledger = Sidekiq::FairTenant::FairFetch::InFlight.ledger(process.fetcher.inflight_key)
      before = in_flight_of(process)
      back = 2.times.sum { sidekiq_redis { |conn| Sidekiq::FairTenant::FairFetch::Audit.run(conn, ledger) } }
      gone = before.tally
      gone.default = 0
      # A process missing from the registry (lapsed, its recovery cut short) registers again in the audit's
      # requeue and takes back its recovered copies (ack.lua's ensure_registered): entries may appear too.
      in_flight_of(process).each { |entry| gone[entry] -= 1 }
      gone.each do |entry, count|
        count.clamp(0..).times { (index = process.leaked.index(entry)) && process.leaked.delete_at(index) }
      end
      @notes[:audit_put_back] += back
      "audit #{process.identity}: #{back} put back"
    end

    def in_flight_of(process)
      sidekiq_redis { |conn| conn.call("HKEYS", process.fetcher.inflight_key) }.map(&:b)
    end
  end

  # The client's retry after a lost reply, for the fair-queue scripts the gem runs (ScriptRunner.run): inside
  # `during`, every call runs twice; the first replies are returned by `during`.
  module Resend
    def self.during
      Thread.current[:conservation_resend] = []
      yield
      Thread.current[:conservation_resend]
    ensure
      Thread.current[:conservation_resend] = nil
    end

    def run(conn, name, keys, argv)
      lost = Thread.current[:conservation_resend]
      return super unless lost && Sidekiq::FairTenant::ScriptRunner::SCRIPTS.fetch(name).function

      lost << [name, super]
      super
    end
  end
  Sidekiq::FairTenant::ScriptRunner.singleton_class.prepend(Resend)
end
