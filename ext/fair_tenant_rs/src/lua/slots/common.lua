-- Shared by the concurrency-slot scripts (prepended to each of them).
--
-- Per scope (a tenant and queue, or a custom key): `<base><sub>:holders`, a sorted set of the
-- jids holding a slot scored by lease expiry (ms), and `<base><sub>:parked`, a sorted set of the
-- parked payloads scored by enqueue time, so the oldest parked job is always handed the next slot.

-- Server time in ms: leases mean the same on every worker host whatever its clock says.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A per-scope override beats a tenant-wide one ('*'), which beats the class's default.
local function effective_limit(limits_key, sub, default)
  local v = redis.call('HMGET', limits_key, sub, '*')
  return tonumber(v[1] or v[2] or default)
end

-- Drops expired leases, then gives every free slot to the oldest parked job: its lease is taken
-- on its behalf and it goes back to the front of its queue (Sidekiq pops from the right).
local function hand_over(holders, parked, limit, now, lease_until)
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  local free = limit - redis.call('ZCARD', holders)
  local handed = 0
  while free > 0 do
    local popped = redis.call('ZPOPMIN', parked)
    if popped[1] == nil then
      break
    end
    local job = cjson.decode(popped[1])
    redis.call('ZADD', holders, lease_until, job.jid)
    redis.call('SADD', 'queues', job.queue)
    redis.call('RPUSH', 'queue:' .. job.queue, popped[1])
    free = free - 1
    handed = handed + 1
  end
  return handed
end
