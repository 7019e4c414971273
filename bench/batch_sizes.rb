# frozen_string_literal: true

# The sizes of a drained process's fetch calls (threads a call served: FairFetch::Batch), which bench/drain_app.rb
# leaves in Redis when the process stops.
module BatchSizes
  module_function

  # The fetch calls' sizes (threads served a call) the process left: mean and p95 (0 with BasicFetch).
  def read(redis)
    sizes = redis.hgetall("bench:batches").map { |size, calls| [size.to_i, calls.to_i] }.sort
    calls = sizes.sum(&:last)
    return { batch_mean: 0.0, batch_p95: 0 } if calls.zero?

    seen = 0
    p95 = sizes.find { |_, n| (seen += n) >= calls * 0.95 }.first
    { batch_mean: sizes.sum { |size, n| size * n }.fdiv(calls), batch_p95: p95 }
  end
end
