# frozen_string_literal: true

# A job of the fair queue `fair` whose tenant is its first argument (fair_payloads_spec.rb).
class OddPayloadJob
  include Sidekiq::Worker

  sidekiq_options queue: "fair", retry: false

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# A seeded run of odd payloads into the fair queue `fair` and a drain by two fetchers (fair_payloads_spec.rb).
# Each payload carries a marker ("mk<n>x") in its bytes; after the drain each marker must have run once (a
# valid job), or run once or be in the dead set once (an odd one).
module OddPayloads
  TENANTS = %w[t0 t1 t2 t3].freeze
  # JSON texts the scripts could choke on (read with Lua's tonumber, cjson, ZADD, PEXPIRE...).
  ODD_JSON = ["NaN", '"nan"', '"inf"', '"-inf"', "1e309", "-1e309", "-1", "-0.5", "123456789012345678901234567890",
              "1e300", "1.5", "1e15", '"x"', '""', "[]", "[1,2]", "{}", '{"a":1}', "null", "true", "false",
              "\"\xff\xfe\"".b].freeze
  # Whole payloads that are not jobs (%s: the marker).
  NOT_JOBS = ["not json %s", '[1,"%s"]', '"%s"', '{"class":"OddPayloadJob","args":["t0","%s"', "\xff\xfe %s"].freeze
  # Odd values a client may put in a job (Sidekiq fills a nil jid; a value JSON cannot write makes it raise).
  ODD_RUBY = [Float::NAN, Float::INFINITY, -1, 10**30, "nan", "inf", [], {}, nil, true, "\xff\xfe".b].freeze
  FIELDS = %w[enqueued_at created_at jid fair_tenant_slot fair_tenant_rate_cap].freeze
  # Weights written by hand (a negative one pauses its tenant, as it should: left out).
  ODD_WEIGHTS = ["nan", "inf", "-inf", "1e309", "x", "", "[]"].freeze

  # How a Run pushes: raw to `queue:fair`, through the client, or into a dead process's in-flight list.
  module Pushes
    # A job pushed raw to `queue:fair` (adopted by the next fetch); `fields`: name -> JSON text (nil: absent).
    def raw_push(tenant, fields, head: false)
      marker, text = job_text(tenant, fields, head)
      Sidekiq.redis { |conn| conn.call("LPUSH", "queue:fair", text) }
      marker.tap { @expect[marker] = fields.empty? ? :valid : :odd }
    end

    # A job pushed through Sidekiq's client, with `extra` fields; nil when the client refused it.
    def client_push(tenant, extra = {})
      marker = next_marker
      Sidekiq::Client.push({ "class" => OddPayloadJob, "args" => [tenant, marker] }.merge(extra))
      marker.tap { @expect[marker] = extra.empty? ? :valid : :odd }
    rescue StandardError
      @counts[:refused] += 1
      nil
    end

    private

    def push_one
      tenant = TENANTS.sample(random: @random)
      case @random.rand(10)
      when 0..3 then raw_push(tenant, odd_fields, head: @random.rand(2).zero?)
      when 4 then not_a_job
      when 5 then client_push(tenant, FIELDS.sample(random: @random) => ODD_RUBY.sample(random: @random))
      when 6..7 then inflight_push(tenant, odd_fields)
      else valid_push(tenant)
      end
    end

    # One tenant's weight in `fair` and another's everywhere, as written by hand.
    def odd_weight
      fields = [Sidekiq::FairTenant::Native::Fair.weight_field("t2", "fair"), "t3"]
      Sidekiq.redis do |conn|
        fields.each do |field|
          conn.call("HSET", Sidekiq::FairTenant::FairQueues::WEIGHTS_KEY, field, odd(ODD_WEIGHTS, nan: "nan"))
        end
      end
    end

    # An odd value, "nan" a quarter of the time (what Lua's tonumber reads as NaN, which ZADD refuses).
    def odd(values = ODD_JSON, nan: '"nan"')
      @random.rand(4).zero? ? nan : values.sample(random: @random)
    end

    def valid_push(tenant)
      case @random.rand(3)
      when 0 then raw_push(tenant, {})
      when 1 then client_push(tenant)
      else inflight_push(tenant, {})
      end
    end

    # One to three fields with odd values (the slot and rate fields: an odd array member, or an odd value).
    def odd_fields
      FIELDS.sample(1 + @random.rand(3), random: @random).to_h do |field|
        [field, @random.rand(8).zero? ? nil : odd_field(field, odd)]
      end
    end

    def odd_field(field, value)
      return value if @random.rand(2).zero?

      case field
      when "fair_tenant_slot" then %(["st","s",#{value},#{value},#{value}])
      when "fair_tenant_rate_cap" then %(["rt","s",#{value},#{value}])
      else value
      end
    end

    def not_a_job
      marker = next_marker
      @expect[marker] = :odd
      Sidekiq.redis { |conn| conn.call("LPUSH", "queue:fair", format(NOT_JOBS.sample(random: @random), marker).b) }
    end

    # A job left in the in-flight list of a process that died (recovered to the front of its tenant).
    def inflight_push(tenant, fields)
      marker, text = job_text(tenant, fields, @random.rand(2).zero?)
      @expect[marker] = fields.empty? ? :valid : :odd
      entry = "4:fair#{tenant.bytesize}:#{tenant}".b + text
      Sidekiq.redis { |conn| conn.call("LPUSH", Sidekiq::FairTenant::Native::Fair.inflight_key("gone:1:x"), entry) }
    end

    # [marker, JSON text]: a job of `tenant` with `fields` (JSON texts; nil: left out) over valid ones.
    def job_text(tenant, fields, head)
      marker = next_marker
      now = Time.now.to_f.to_s
      all = { "enqueued_at" => now, "jid" => %("#{marker}") }
      all.merge!("class" => '"OddPayloadJob"', "args" => %(["#{tenant}","#{marker}"]), "queue" => '"fair"',
                 "created_at" => now)
      all.merge!(fields)
      keys = head ? all.keys : all.keys.shuffle(random: @random)
      [marker, "{#{keys.filter_map { |k| all[k] && %("#{k}":#{all[k]}) }.join(",")}}".b]
    end

    def next_marker
      @serial += 1
      "mk#{@serial}x"
    end
  end

  # The run: push (raw_push, client_push, inflight_push), then drain; violations and report.
  class Run
    include Pushes

    attr_reader :violations, :counts, :ran, :min_size

    def initialize(seed:, jobs:)
      @seed = seed
      @jobs = jobs
      @random = Random.new(seed)
      @violations = []
      @counts = Hash.new(0)
      @ran = Hash.new(0)
      @expect = {} # marker -> :valid or :odd
      @min_size = 0
      @serial = 0
      @fetchers = %w[a b].map { |name| Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "odd:1:#{name}") }
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end

    def call
      odd_weight
      @jobs.times { push_one }
      recover
      drain
      TENANTS.map { |tenant| client_push(tenant) }.tap { drain } # every tenant still in the rotation
      self
    end

    # Drains with the fetchers until they find nothing several times in a row; acknowledges what they run.
    def drain
      idle = 0
      2000.times do
        unit = fetch(@fetchers.sample(random: @random))
        idle = unit ? 0 : idle + 1
        break if idle >= 8

        run(unit) if unit
      end
      @fetchers.each(&:flush_acks)
      check
    end

    def report
      lines = ["seed #{@seed} (replay: FAIR_PAYLOADS_SEED=#{@seed} FAIR_PAYLOADS_JOBS=#{@jobs}), counts #{@counts}"]
      (lines + @violations.first(30)).join("\n")
    end

    private

    def recover
      Sidekiq.redis do |conn|
        # As the liveness look leaves a dead process: registered, suspected long ago, no heartbeat key.
        conn.call("SADD", Sidekiq::FairTenant::Native::Fair.registry_key, "gone:1:x")
        conn.call("HSET", Sidekiq::FairTenant::Native::Fair.recovery_suspects_key, "gone:1:x", "0")
        Sidekiq::FairTenant::FairQueues::Recovery.recover_process(conn, "gone:1:x")
      end
    rescue StandardError => e
      @violations << "recovery raised #{e.class}: #{e.message}"
    end

    # Every fetch looks before it blocks (no idle pacing: raw pushes leave no wake-up token).
    def fetch(fetcher)
      fetcher.instance_variable_get(:@threads)[Thread.current].idle = false
      fetcher.retrieve_work
    rescue StandardError => e
      @violations << "fetch raised #{e.class}: #{e.message}"
      nil
    ensure
      size = Sidekiq::Queue.new("fair").size
      @min_size = size if size < @min_size
    end

    def run(unit)
      marker = unit.job.b[/mk\d+x/]
      @ran[marker] += 1 if marker
      unit.acknowledge
    end

    def check
      dead = Sidekiq.redis { |conn| conn.call("ZRANGE", "dead", 0, -1) }.map { |job| job.b[/mk\d+x/] }.tally
      @counts = Hash.new(0).merge(refused: @counts[:refused])
      @expect.each { |marker, kind| check_one(marker, kind, @ran[marker], dead.fetch(marker, 0)) }
      @violations << "Sidekiq::Queue#size went down to #{@min_size}" if @min_size.negative?
      left = Sidekiq::Queue.new("fair").size
      @violations << "#{left} job(s) left in the queue after the drain" unless left.zero?
    end

    def check_one(marker, kind, ran, dead)
      @counts[kind] += 1
      @counts[:ran] += ran
      @counts[:dead] += dead
      return if ran + dead == 1 && (kind == :odd || dead.zero?)

      @violations << "#{kind} job #{marker}: ran #{ran} time(s), #{dead} in the dead set"
    end
  end
end
