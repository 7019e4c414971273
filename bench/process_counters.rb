# frozen_string_literal: true

require "etc"

# What processes (the `sidekiq`s of the drain table) did between two snapshots, every thread included: CPU
# seconds (utime + stime, /proc/<pid>/stat) and context switches (voluntary and involuntary, /proc/<pid>/task/*):
# a process whose threads hand work to each other switches more, and each switch costs CPU under the GVL.
class ProcessCounters
  attr_reader :cpu, :switches

  TICKS = Etc.sysconf(Etc::SC_CLK_TCK).to_f

  def self.take(pids) = new(pids.sum { |pid| cpu_of(pid) }, pids.sum { |pid| switches_of(pid) })

  def self.cpu_of(pid)
    fields = File.read("/proc/#{pid}/stat").split(") ").last.split
    (fields[11].to_i + fields[12].to_i) / TICKS
  end

  def self.switches_of(pid)
    Dir["/proc/#{pid}/task/*/status"].sum do |path|
      File.read(path).scan(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/).sum { |(n)| n.to_i }
    rescue Errno::ENOENT, Errno::ESRCH # a thread that ended meanwhile
      0
    end
  end

  def initialize(cpu, switches)
    @cpu = cpu
    @switches = switches
  end

  # {cpu: seconds, switches:} since `before`.
  def since(before) = { cpu: cpu - before.cpu, switches: switches - before.switches }
end
