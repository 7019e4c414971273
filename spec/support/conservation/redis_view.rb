# frozen_string_literal: true

# rubocop:disable Metrics/ClassLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

module Conservation
  # Where every job is in Redis at one moment, read key by key: waiting (`queue:<q>` lists, fair tenant
  # lists `<base>t:<tenant>`, parked slots), in flight (per identity), dead. A job is known by its jid, or by
  # the `garbage-<n>` marker of a payload that is not a job. Also the fair state's `n` against the tenant
  # lists, and the in-flight registry. `problems` lists what cannot be right whatever the model says.
  class RedisView
    INFLIGHT = Sidekiq::FairTenant::Native::Fair.inflight_key("").b.freeze
    REGISTRY = Sidekiq::FairTenant::Native::Fair.registry_key.b.freeze
    RECOVERING = Sidekiq::FairTenant::Native::Fair.recovering_key.b.freeze
    JID = /"jid":"([^"\\]+)"/n
    GARBAGE = /garbage-\d+/n
    # Keys that never hold a job (checked anyway when their type could).
    QUIET = /\A(queues|processes|sidekiq-fair_tenant:(slots|limits|fair:weights|recovery-lock))/n

    attr_reader :places, :inflight, :registry, :problems, :backlogs

    # The id of a payload: its jid, or its garbage marker; nil when it has neither.
    def self.id_of(payload)
      bin = payload.b
      (bin[GARBAGE] || bin[JID, 1])&.force_encoding(Encoding::UTF_8)
    end

    # "<len>:<queue><len>:<tenant><job>" read as bytes: [queue, tenant, job], nil when malformed.
    def self.decode(entry)
      bin = entry.b
      queue_len = bin[/\A(\d+):/n, 1] or return nil
      at = queue_len.size + 1
      queue = bin.byteslice(at, queue_len.to_i)
      at += queue_len.to_i
      tenant_len = bin.byteslice(at..)[/\A(\d+):/n, 1] or return nil
      at += tenant_len.size + 1
      [queue, bin.byteslice(at, tenant_len.to_i), bin.byteslice((at + tenant_len.to_i)..)]
    end

    def initialize(conn, fair_queues)
      @places = Hash.new { |hash, id| hash[id] = [] }
      @inflight = {}
      @problems = []
      @backlogs = {}
      @bases = fair_queues.to_h { |queue| [Sidekiq::FairTenant::FairQueues.base(queue).b, queue] }
      keys = conn.call("KEYS", "*").map(&:b)
      @registry = conn.call("SUNION", REGISTRY, RECOVERING).map(&:b) # registered, or being recovered
      read_keys(conn, keys)
      check_backlogs(conn)
      check_members(conn)
    end

    private

    def read_keys(conn, keys)
      lists, zsets, unknown = classify(keys)
      inflight, lists = lists.partition { |_key, kind| kind == :inflight }
      read_inflight_keys(conn, inflight.map(&:first))
      read_lists(conn, lists)
      read_zsets(conn, zsets)
      scan_unknown(conn, unknown)
    end

    # [[key, kind] lists], [[key, kind] zsets], other keys.
    def classify(keys)
      lists = []
      zsets = []
      unknown = []
      keys.each do |key|
        if key.start_with?("queue:") then lists << [key, :queue]
        elsif key.start_with?(INFLIGHT) then lists << [key, :inflight]
        elsif (base = tenant_base(key)) then lists << [key, :tenant, base]
        elsif key == "dead" then zsets << [key, :dead]
        elsif key.end_with?(":parked") then zsets << [key, :parked]
        elsif !fair_state_key?(key) then unknown << key
        end
      end
      [lists, zsets, unknown]
    end

    def tenant_base(key)
      @bases.each_key.find { |base| key.start_with?("#{base}t:") }
    end

    # A fair queue's other keys (ready, state, fin, paused, sig, heads, capped, over) hold tenants and tokens.
    def fair_state_key?(key)
      key.start_with?(Sidekiq::FairTenant::Native::Fair.base("").b.delete_suffix("{}:"))
    end

    def read_lists(conn, lists)
      contents = conn.pipelined { |pipe| lists.each { |list| pipe.call("LRANGE", list.first, 0, -1) } }
      lists.zip(contents).each do |(key, kind, base), items|
        items = items.map(&:b)
        case kind
        when :tenant
          (@backlogs[base] ||= []) << items.size
          items.each { |job| place(job, :tenant, key) }
        else items.each { |job| place(job, :queue, key) }
        end
      end
    end

    # In-flight hashes (field -> job), and lists a process of an older gem left (entries: the job at the end).
    def read_inflight_keys(conn, keys)
      types = conn.pipelined { |pipe| keys.each { |key| pipe.call("TYPE", key) } }
      contents = conn.pipelined do |pipe|
        keys.zip(types) do |key, type|
          type.to_s == "list" ? pipe.call("LRANGE", key, 0, -1) : pipe.call("HGETALL", key)
        end
      end
      keys.zip(types, contents) do |key, type, items|
        items = items.to_a.flatten.map(&:b)
        pairs = if type.to_s == "list"
                  items.map { |entry| [entry, self.class.decode(entry)&.last] }
                else
                  items.each_slice(2)
                end
        read_inflight(key, pairs.to_a)
      end
    end

    def read_inflight(key, pairs)
      identity = key.byteslice(INFLIGHT.bytesize..)
      @inflight[identity] = pairs.map(&:first)
      pairs.each do |field, job|
        job ? place(job, :inflight, identity) : @problems << "malformed in-flight entry in #{key}: #{field.inspect}"
      end
    end

    # A key named like a sorted set of jobs that is something else is a problem, shown with what it holds.
    def read_zsets(conn, zsets)
      types = conn.pipelined { |pipe| zsets.each { |(key, _kind)| pipe.call("TYPE", key) } }
      zsets, odd = zsets.zip(types).partition { |_zset, type| type.to_s == "zset" }
      odd.each { |(key, _kind), type| @problems << "#{key.inspect} is a #{type}: #{dump(conn, key, type)}" }
      keys = zsets.map { |zset, _type| zset.first }
      contents = conn.pipelined { |pipe| keys.each { |key| pipe.call("ZRANGE", key, 0, -1) } }
      zsets.zip(contents).each { |((key, kind), _type), items| items.each { |job| place(job.b, kind, key) } }
    end

    def dump(conn, key, type)
      value = case type.to_s
              when "hash" then conn.call("HGETALL", key)
              when "list" then conn.call("LRANGE", key, 0, -1)
              when "set" then conn.call("SMEMBERS", key)
              when "string" then conn.call("GET", key)
              end
      value.inspect[0, 300]
    end

    def place(payload, kind, where)
      id = self.class.id_of(payload)
      return @places[id] << [kind, where, payload] if id

      @problems << "a payload that is no job (no jid, no marker) in #{kind} #{where.inspect}: #{payload[0,
                                                                                                        120].inspect}"
    end

    # Any other key of a type that could hold a job must not hold one.
    def scan_unknown(conn, keys)
      types = conn.pipelined { |pipe| keys.each { |key| pipe.call("TYPE", key) } }
      keys.zip(types).each do |key, type|
        next if QUIET.match?(key) && type != "list"

        values = case type
                 when "list" then conn.call("LRANGE", key, 0, -1)
                 when "zset" then conn.call("ZRANGE", key, 0, -1)
                 when "set" then conn.call("SMEMBERS", key)
                 when "string" then [conn.call("GET", key)]
                 else []
                 end
        held = values.compact.map(&:b).select { |value| value.match?(JID) || value.match?(GARBAGE) }
        @problems << "job(s) in an unexpected key #{key.inspect} (#{type}): #{held.first.inspect}" unless held.empty?
      end
    end

    # The members index names each tenant's member in ready, capped, over and rated, and nothing else.
    def check_members(conn)
      names = Sidekiq::FairTenant::Native::Names
      digits = names::ACTIVATION_DIGITS
      @bases.each do |base, queue|
        tiers = [names::READY, names::CAPPED, names::OVER, names::RATED]
        members = tiers.flat_map { |tier| conn.call("ZRANGE", "#{base}#{tier}", 0, -1).map(&:b) }
        expected = members.to_h { |member| [member.byteslice(digits..), member] }
        index = conn.call("HGETALL", "#{base}#{names::MEMBERS}")
        index = (index.is_a?(Hash) ? index.to_a : index.each_slice(2).to_a).to_h { |t, m| [t.b, m.b] }
        @problems << "fair queue #{queue}: members index #{index.inspect[0, 200]}, tiers #{expected.inspect[0, 200]}" \
          unless index == expected
      end
    end

    # The fair state's n counts the jobs in the queue's tenant lists.
    def check_backlogs(conn)
      @bases.each do |base, queue|
        n = conn.call("HGET", "#{base}state", "n").to_i
        held = (@backlogs[base] || []).sum
        @problems << "fair queue #{queue}: state n = #{n}, tenant lists hold #{held}" unless n == held
      end
    end
  end
end
# rubocop:enable Metrics/ClassLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
