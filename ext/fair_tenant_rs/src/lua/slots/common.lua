-- Shared by the concurrency-slot scripts (prepended to each of them).
--
-- Per scope (a tenant and queue, or a custom key): `<base><sub>:holders`, a sorted set of the
-- jids holding a slot scored by lease expiry (ms), and `<base><sub>:parked`, a sorted set of the
-- parked payloads scored by enqueue time, so the oldest parked job is always handed the next slot.
-- A slot belongs to one run of its job (a server thread's token): `<base><sub>:runs`, jid -> run (K_HANDED and
-- the parking run's token while a handed-over job waits to be fetched). A parked job keeps its own terms in
-- `<base><sub>:waits`, jid -> "run limit lease": it is handed a slot under its own limit, not the releaser's.

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

-- The keys of one scope, with the limit and lease a parked job without terms of its own is handed over with
-- (the scope's registration: jobs parked before runs were recorded).
local function slot_keys(base, sub, limits, default, lease)
  local at = base .. sub
  return { holders = at .. K_HOLDERS, parked = at .. K_PARKED, runs = at .. K_RUNS, waits = at .. K_WAITS,
           limits = limits, sub = sub, default = default, lease = lease }
end

-- A parked job's terms: run, default limit, lease ms (nil, the scope's, the scope's when it has none).
local function terms(s, jid)
  local w = redis.call('HGET', s.waits, jid)
  if not w then return nil, s.default, s.lease end
  local run, default, lease = string.match(w, '^(%S*)' .. K_META_SEPARATOR .. '(%S+)' .. K_META_SEPARATOR .. '(%S+)$')
  return run, default, lease
end

-- Takes a handed-over copy back from its queue when it is still among the K_FORGET_TAIL jobs at the tail
-- (where a hand-over pushes it, and where Sidekiq pops). True when it was there.
local function take_back(queue, payload)
  for _, entry in ipairs(redis.call('LRANGE', 'queue:' .. queue, -K_FORGET_TAIL, -1)) do
    if entry == payload then
      redis.call('LREM', 'queue:' .. queue, -1, payload)
      return true
    end
  end
  return false
end

-- Drops expired leases (and their runs), the holders left.
local function reclaim(s, now)
  local expired = redis.call('ZRANGEBYSCORE', s.holders, '-inf', now)
  for _, jid in ipairs(expired) do redis.call('HDEL', s.runs, jid) end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', s.holders, '-inf', now) end
  return #expired
end

-- Gives free slots to the oldest parked jobs, each under its own limit: the oldest goes while the holders are
-- below its limit (a runtime override beats every job's own), and it stops the hand-over when they are not
-- (hand-overs stay oldest first). Its lease is taken on its behalf (runs: K_HANDED .. the run that parked it)
-- and it goes back to the front of its queue (Sidekiq pops from the right). At most K_HAND_OVER_BATCH jobs and
-- K_HAND_OVER_BYTES bytes of payload per call. Returns the jobs handed a slot and 1 when more could go now.
local function hand_over(s, now)
  reclaim(s, now)
  local running = redis.call('ZCARD', s.holders)
  local handed, bytes = 0, 0
  while true do
    local head = redis.call('ZRANGE', s.parked, 0, 0)[1]
    if head == nil then return handed, 0 end
    if handed >= K_HAND_OVER_BATCH or bytes >= K_HAND_OVER_BYTES then return handed, 1 end
    bytes = bytes + #head
    local ok, job = pcall(cjson.decode, head)
    if not (ok and parked_job(job)) then
      -- Not a job it can hand over (parked by hand): to Sidekiq's dead set as it is, never dropped.
      redis.call('ZREM', s.parked, head)
      redis.call('ZADD', 'dead', now / 1000, head)
    else
      local jid = tostring(job.jid)
      local run, default, lease = terms(s, jid)
      -- One slot per jid: a copy parked while another run of its jid holds one waits for that run's release.
      if running >= effective_limit(s.limits, s.sub, default) or redis.call('ZSCORE', s.holders, jid) then
        return handed, 0
      end
      redis.call('ZREM', s.parked, head)
      redis.call('HDEL', s.waits, jid)
      redis.call('ZADD', s.holders, now + (finite(lease, 1) or K_DEFAULT_LEASE_MS), jid)
      redis.call('HSET', s.runs, jid, K_HANDED .. (run or ''))
      redis.call('SADD', 'queues', job.queue)
      redis.call('RPUSH', 'queue:' .. job.queue, head)
      running, handed = running + 1, handed + 1
    end
  end
end
