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

-- `x` (a number, or a string a number is read from) when it is a finite number within [lo, hi] (bounds
-- optional), else nil: NaN, +-inf, out of range, or no number at all (a table, a boolean, cjson's null). Every
-- value a script takes from a payload, an argument or a hash anyone may write goes through here *before* the
-- script's first write: Redis never rolls a script back, and ZADD refuses NaN, PEXPIRE a fraction.
local function finite(x, lo, hi)
  local n = tonumber(x)
  if not n or n ~= n or n == math.huge or n == -math.huge then return nil end
  if (lo and n < lo) or (hi and n > hi) then return nil end
  return n
end

-- A per-scope override beats a tenant-wide one ('*'), which beats the class's default; a value that is not a
-- number from 0 up (written by hand) is passed over.
local function effective_limit(limits_key, sub, default)
  local v = redis.call('HMGET', limits_key, sub, K_ALL_SCOPES)
  return finite(v[1], 0) or finite(v[2], 0) or finite(default, 0) or K_DEFAULT_LIMIT
end

-- A parked payload a slot can be handed to: a JSON object with a jid and a queue name.
local function parked_job(job)
  return type(job) == 'table' and (type(job.jid) == 'string' or type(job.jid) == 'number')
    and type(job.queue) == 'string' and job.queue ~= ''
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
    local ok, job = pcall(cjson.decode, popped[1])
    while not (ok and parked_job(job)) do
      -- Not a job it can hand over (parked by hand): to Sidekiq's dead set as it is, never dropped.
      redis.call('ZADD', 'dead', now / 1000, popped[1])
      popped = redis.call('ZPOPMIN', parked)
      if popped[1] == nil then return handed end
      ok, job = pcall(cjson.decode, popped[1])
    end
    redis.call('ZADD', holders, lease_until, tostring(job.jid))
    redis.call('SADD', 'queues', job.queue)
    redis.call('RPUSH', 'queue:' .. job.queue, popped[1])
    free = free - 1
    handed = handed + 1
  end
  return handed
end
