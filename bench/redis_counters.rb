# frozen_string_literal: true

# What a redis-server did between two snapshots: CPU seconds (INFO cpu used_cpu_user + used_cpu_sys), commands
# (INFO commandstats calls, those run inside scripts included: Redis counts each redis.call) and server time
# (commandstats usec). INFO itself is left out; `ignore` names more commands to leave out (a bench's own polls).
class RedisCounters
  attr_reader :cpu, :stats

  def self.take(redis) = new(redis.info("cpu"), redis.info("commandstats"))

  def initialize(cpu, commandstats)
    @cpu = cpu.fetch("used_cpu_user").to_f + cpu.fetch("used_cpu_sys").to_f
    @stats = commandstats.to_h do |cmd, v|
      [cmd.delete_prefix("cmdstat_"), { calls: v.fetch("calls").to_i, usec: v.fetch("usec").to_i }]
    end
  end

  # {cpu: seconds, calls:, usec:, by_command: {cmd => calls}} since `before`.
  def since(before, ignore: {})
    by_command = stats.to_h { |cmd, v| [cmd, v[:calls] - before.stats.fetch(cmd, { calls: 0 })[:calls]] }
    usec = stats.sum { |cmd, v| cmd == "info" ? 0 : v[:usec] - before.stats.fetch(cmd, { usec: 0 })[:usec] }
    by_command.delete("info")
    ignore.each { |cmd, n| by_command[cmd] -= n if by_command.key?(cmd) }
    by_command.reject! { |_, n| n.zero? }
    { cpu: cpu - before.cpu, calls: by_command.values.sum, usec: usec, by_command: by_command }
  end
end
