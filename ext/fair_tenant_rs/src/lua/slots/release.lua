-- Frees a finished job's slot (idempotent) and hands free slots to the oldest parked jobs.
-- Fair-queue tenants waiting on the scope (fair_caps.lua) get what is left.
-- KEYS  holders, parked, limits, waiting
-- ARGV  jid, lease (ms) for handed-over jobs, default limit, sub
-- Returns the number of jobs handed a slot.
redis.call('ZREM', KEYS[1], ARGV[1])
-- Nobody waits: nothing to hand over (expired leases are dropped when a slot is next needed).
if redis.call('EXISTS', KEYS[2], KEYS[4]) == 0 then
  return 0
end
local now = now_ms()
local limit = effective_limit(KEYS[3], ARGV[4], ARGV[3])
local handed = hand_over(KEYS[1], KEYS[2], limit, now, now + (finite(ARGV[2], 1) or K_DEFAULT_LEASE_MS))
wake({ holders = KEYS[1], waiting = KEYS[4] }, limit, true)
return handed
