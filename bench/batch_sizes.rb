# frozen_string_literal: true

# What a drained process leaves in Redis when it stops (bench/drain_app.rb): the sizes of its fetch calls (threads a
# call served: FairFetch::Batch), and with BENCH_PARTS its methods' clocks (bench/method_clock.rb).
module BatchSizes
  module_function

  # The fetch calls' sizes (threads served a call) the process left: mean and p95 (0 with BasicFetch); `parts`:
  # {label => [calls, µs]}.
  def read(redis)
    parts = redis.hgetall("bench:parts").transform_values { |v| v.split.then { |calls, us| [calls.to_i, us.to_f] } }
    sizes(redis).merge(parts: parts)
  end

  def sizes(redis)
    sizes = redis.hgetall("bench:batches").map { |size, calls| [size.to_i, calls.to_i] }.sort
    calls = sizes.sum(&:last)
    return { batch_mean: 0.0, batch_p95: 0 } if calls.zero?

    seen = 0
    p95 = sizes.find { |_, n| (seen += n) >= calls * 0.95 }.first
    { batch_mean: sizes.sum { |size, n| size * n }.fdiv(calls), batch_p95: p95 }
  end
end
