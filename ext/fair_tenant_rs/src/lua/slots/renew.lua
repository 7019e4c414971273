-- Extends the leases of jobs still running in this process (a heartbeat).
-- KEYS  holders key, runs key of each job
-- ARGV  jid, run ('': whichever holds it, as for a slot a fair queue's fetch took), lease (ms) for each job
-- Only existing holders are touched, each by the run that holds it: a lease already reclaimed stays reclaimed,
-- and a run never extends another run's slot.
local now = now_ms()
local renewed = 0
for i = 1, #KEYS, 2 do
  local at = (i - 1) / 2 * 3
  local jid, run = ARGV[at + 1], ARGV[at + 2]
  local owner = redis.call('HGET', KEYS[i + 1], jid)
  if owner == false or owner == run or run == '' then
    renewed = renewed + redis.call('ZADD', KEYS[i], 'XX', 'CH', now + (finite(ARGV[at + 3], 1) or K_DEFAULT_LEASE_MS), jid)
  end
end
return renewed
