# frozen_string_literal: true

# Counts the Redis round trips the current thread's clients make in a block: one per command, or per pipeline,
# written and its replies read (a client's re-send after a lost reply is one more). Sidekiq 7+ (redis-client): a
# middleware; Sidekiq 6.4 (redis-rb 4.x): Redis::Client#process, which every call and pipeline goes through.
module RoundTrips
  KEY = :spec_round_trips

  def self.count!
    counts = Thread.current[KEY]
    counts[0] += 1 if counts
  end

  # redis-client's middleware hooks.
  module Middleware
    def call(command, config)
      RoundTrips.count!
      super
    end

    def call_pipelined(commands, config)
      RoundTrips.count!
      super
    end
  end

  # redis-rb 4.x.
  module Process
    def process(commands)
      RoundTrips.count!
      super
    end
  end

  module_function

  def install
    return if @installed

    @installed = true
    RedisClient.register(Middleware) if defined?(::RedisClient) && ::RedisClient.respond_to?(:register)
    return unless defined?(::Redis::Client)

    ::Redis::Client.prepend(Process) if ::Redis::Client.instance_methods.include?(:process)
  end

  # Round trips the block made on this thread.
  def count
    install
    Thread.current[KEY] = [0]
    yield
    Thread.current[KEY][0]
  ensure
    Thread.current[KEY] = nil
  end
end
