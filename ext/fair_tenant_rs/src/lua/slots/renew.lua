-- Extends the leases of jobs still running in this process (a heartbeat).
-- KEYS  holders key of each job
-- ARGV  jid, lease (ms) for each job, in the same order
-- Only existing holders are touched: a lease already reclaimed stays reclaimed.
local now = now_ms()
local renewed = 0
for i, holders in ipairs(KEYS) do
  local lease = finite(ARGV[2 * i], 1) or K_DEFAULT_LEASE_MS -- read before this holder's write
  renewed = renewed + redis.call('ZADD', holders, 'XX', 'CH', now + lease, ARGV[2 * i - 1])
end
return renewed
