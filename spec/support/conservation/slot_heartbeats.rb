# frozen_string_literal: true

module Conservation
  # Each process's slot heartbeat (Slots: the thread that renews the leases of the jobs a process runs, and that
  # Sidekiq's :shutdown tells to end once nothing is held), on the run's clock. The gem keeps it in Slots' module
  # state, one per Ruby process; a run has several processes in one: while a step acts as a process (`as`), Slots'
  # state is that process's own, and the thread Slots.start makes is a Heartbeat, which turns when the steps say
  # (lease_time_passes), never on the wall clock.
  module SlotHeartbeats
    STATE = %i[@running @thread @pid @stopping].freeze
    SLOTS = Sidekiq::FairTenant::Concurrency::Slots

    # Stands for the heartbeat thread: alive until killed (Slots.stop) or its loop ended.
    class Heartbeat
      attr_accessor :name

      def initialize
        @alive = true
      end

      def alive? = @alive
      def join(_limit = nil) = self

      def kill
        @alive = false
        self
      end
    end

    @as = nil

    class << self
      # A new process's Slots state: nothing running, no heartbeat yet.
      def fresh = [{}.compare_by_identity, nil, ::Process.pid, false]

      def acting? = !@as.nil?

      # Runs the block with Slots' state the process's own.
      def as(process)
        return yield if @as.equal?(process)
        raise "acting as #{@as.identity} already, not as #{process.identity} too" if @as

        outside = STATE.map { |name| SLOTS.instance_variable_get(name) }
        STATE.zip(process.slots) { |name, value| SLOTS.instance_variable_set(name, value) }
        @as = process
        begin
          yield
        ensure
          process.slots = STATE.map { |name| SLOTS.instance_variable_get(name) }
          STATE.zip(outside) { |name, value| SLOTS.instance_variable_set(name, value) }
          @as = nil
        end
      end

      # One turn of the process's heartbeat loop (Slots' loop_forever, its own decision): nil when no heartbeat
      # runs there, :ended when it ends now (stopping, nothing held), else how many leases it renewed.
      def turn(process)
        as(process) do
          next nil unless SLOTS.started?

          if SLOTS.send(:idle_after_stop?)
            SLOTS.instance_variable_get(:@thread)&.kill
            next :ended
          end
          SLOTS.send(:renew).to_i
        end
      end
    end

    # Slots.start while a step acts as a process: a Heartbeat instead of a thread.
    module Clock
      def start
        return super unless SlotHeartbeats.acting?
        return if started?

        @mutex.synchronize do
          next if started?

          forget_parent
          @thread = SlotHeartbeats::Heartbeat.new
          @thread.name = "fair_tenant-heartbeat"
        end
      end
    end
    SLOTS.singleton_class.prepend(Clock)
  end

  # The gem's own :quiet and :shutdown hooks, as Sidekiq.configure_server adds them (register_server_middleware).
  class Lifecycle
    # The middleware chains: the gem's middleware is not added here.
    class Chain
      def exists?(_klass) = true
      def add(*) = nil
    end

    def initialize
      @hooks = Hash.new { |hash, event| hash[event] = [] }
      Sidekiq::FairTenant.register_server_middleware(self)
    end

    def on(event, &block) = @hooks[event] << block
    def client_middleware = yield(Chain.new)
    def server_middleware = yield(Chain.new)
    def fire(event) = @hooks.fetch(event).each(&:call)
  end
end
