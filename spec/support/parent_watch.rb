# frozen_string_literal: true

# Loaded by the apps of the `sidekiq` processes specs start: exit when the spec process that
# started us is gone (crashed or killed), so no server outlives a run.
if (parent = ENV.fetch("FAIR_TENANT_SPEC_PARENT", nil))
  Thread.new do
    loop do
      sleep 1
      Process.kill(0, Integer(parent))
    rescue Errno::ESRCH
      Process.kill("KILL", Process.pid)
    end
  end
end
