# frozen_string_literal: true

# The drain table's lines (bench/drain.rb's figures).
module DrainTable
  module_function

  def print(table)
    puts
    puts "  real sidekiq -c 10 draining no-op jobs (one INCR each), BasicFetch vs FairFetch, a private redis-server " \
         "per round, median of #{DrainBench::ROUNDS} alternating rounds; per job: Redis CPU (used_cpu_user+sys), " \
         "Redis commands"
    puts "  (inside scripts included), server us (commandstats usec), pushes + fetches + acks + the job's INCR; the " \
         "sidekiq processes' CPU us and thread switches per job:"
    puts format("  %-7s %8s %7s | %-24s | %-22s | %-22s | %-22s | %-22s | %-16s | %s", "payload", "tenants", "jobs",
                "jobs/s basic fair x", "CPU us basic fair x", "cmds basic fair x", "server us basic fair x",
                "sidekiq us basic fair x", "switches b f", "threads a fetch call: mean p95")
    table.each { |key, cell| row(key, cell) }
    table.select { |_, cell| cell[:reliable] }.each { |key, cell| reliable(key, cell) }
    return unless table.any? { |(_, tenants), cell| cell[:tenants_with_jobs] < tenants }

    puts "  * fewer tenants than asked: one job per tenant at most (raise DRAIN_JOBS_LARGE for more)"
  end

  def row(key, cell)
    bytes, tenants, processes = key
    b, f = cell.values_at(:basic, :fair)
    cols = %i[rate cpu_us commands server_us sidekiq_cpu_us].map do |k|
      format(k == :rate ? "%7.0f %7.0f %6.2fx" : "%6.1f %6.1f %6.2fx", b[k], f[k], f[k] / b[k])
    end
    shown = tenants == cell[:tenants_with_jobs] ? tenants.to_s : "#{cell[:tenants_with_jobs]}*"
    puts format("  %-7s %8s %7d | %-24s | %-22s | %-22s | %-22s | %-23s | %6.2f %6.2f   | %4.1f %3d%s",
                "#{bytes / 1000} KB", shown, cell[:jobs], *cols, b[:switches], f[:switches], f[:batch_mean],
                f[:batch_p95], processes ? "  (#{processes} processes x 10 threads)" : "")
  end

  # The least a reliable fetch does (BLMOVE, then LREM), in the same rounds: what reliability alone costs.
  def reliable(key, cell)
    b, r, f = cell.values_at(:basic, :reliable, :fair)
    ratios = ->(x, y) { %i[rate cpu_us sidekiq_cpu_us].map { |k| format("%.2fx", x[k] / y[k]) } }
    puts format("  %s, %d tenants: a minimal reliable fetch (BLMOVE + LREM, no fairness) / BasicFetch: jobs/s %s, " \
                "Redis CPU %s, sidekiq CPU %s, switches %.2f; FairFetch / it: jobs/s %s, Redis CPU %s, sidekiq CPU %s",
                "#{key[0] / 1000} KB", key[1], *ratios.call(r, b), r[:switches], *ratios.call(f, r))
  end
end
