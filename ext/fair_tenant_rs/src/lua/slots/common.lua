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

-- The score a job enqueued at `score` (ms) parks with in `parked`. Sidekiq 8's enqueue times are whole
-- milliseconds, shared by the jobs pushed within one: such a job parks 1/4096 ms (exact in a double at today's
-- epoch) after the last one parked with its time, so they are handed over in the order they came.
local function park_score(parked, score)
  if score == math.floor(score) then
    local last = redis.call('ZREVRANGEBYSCORE', parked, string.format('(%.17g', score + 1), score, 'WITHSCORES',
      'LIMIT', 0, 1)
    if last[2] then score = math.min(tonumber(last[2]) + 1 / 4096, score + 4095 / 4096) end
  end
  return score
end

-- Drops expired leases (and their runs), the holders left.
local function reclaim(s, now)
  local expired = redis.call('ZRANGEBYSCORE', s.holders, '-inf', now)
  for _, jid in ipairs(expired) do redis.call('HDEL', s.runs, jid) end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', s.holders, '-inf', now) end
  return #expired
end

-- Jobs of several scopes (issue 32, plain queues; acquire_all.lua): the hash beside a scope's holders where each
-- of its parked jobs of several scopes keeps the list of all its scopes (K_OTHERS).
local function others_key(s)
  return string.sub(s.holders, 1, #s.holders - #K_HOLDERS) .. K_OTHERS
end

-- A scope of such a list, {base, sub, limits key, default limit, lease ms, tag}, as hand_over and park_in use it.
local function listed_scope(e)
  local s = slot_keys(e[1], e[2], e[3], e[4], e[5])
  s.meta, s.tag = e[1] .. K_META, e[6]
  return s
end

-- Room in scope `s` for `jid`, enqueued at `score`: a free slot (expired leases dropped only when none is), no
-- slot of the jid there already (another run's), and no older job parked there.
local function room_for(s, jid, score, now)
  local limit = effective_limit(s.limits, s.sub, s.default)
  if redis.call('ZCARD', s.holders) >= limit then
    reclaim(s, now)
    if redis.call('ZCARD', s.holders) >= limit then return false end
  end
  if redis.call('ZSCORE', s.holders, jid) then return false end
  local oldest = redis.call('ZRANGE', s.parked, 0, 0, 'WITHSCORES')
  return oldest[1] == nil or score < tonumber(oldest[2])
end

-- Parks a job of several scopes on `s` (one that refused it), holding nothing: its payload at `score`, its terms,
-- its list of scopes (`packed`), and the scope registered for the sweep.
local function park_in(s, jid, run, payload, score, packed)
  redis.call('ZADD', s.parked, score, payload)
  redis.call('HSET', s.waits, jid, run .. K_META_SEPARATOR .. s.default .. K_META_SEPARATOR .. s.lease)
  redis.call('HSET', others_key(s), jid, packed)
  redis.call('HSET', s.meta, s.sub, s.default .. K_META_SEPARATOR .. s.lease)
  redis.call('SADD', K_SLOT_TAGS_KEY, s.tag)
end

-- The scopes of a parked job of several (its K_OTHERS entry), or nil for a job of one scope (or an entry that
-- cannot be read: the job is then handed its slot in this scope alone, as a job of one).
local function listed(s, jid)
  local packed = redis.call('HGET', others_key(s), jid)
  if not packed then return nil end
  local ok, list = pcall(cmsgpack.unpack, packed)
  if not ok or type(list) ~= 'table' then return nil end
  for _, e in ipairs(list) do
    if type(e) ~= 'table' or type(e[1]) ~= 'string' or type(e[2]) ~= 'string' or type(e[3]) ~= 'string'
        or type(e[6]) ~= 'string' or not finite(e[4], 0) or not finite(e[5], 1) then
      return nil
    end
  end
  return list, packed
end

-- Gives free slots to the oldest parked jobs, each under its own limit: the oldest goes while the holders are
-- below its limit (a runtime override beats every job's own), and it stops the hand-over when they are not
-- (hand-overs stay oldest first). Its lease is taken on its behalf (runs: K_HANDED .. the run that parked it)
-- and it goes back to the front of its queue (Sidekiq pops from the right). A job of several scopes is handed a
-- slot in every one at once when all have room for it, else it moves to park on the first that refuses (its
-- enqueue score kept), holding none. At most K_HAND_OVER_BATCH jobs handed or moved and K_HAND_OVER_BYTES bytes
-- of payload per call. Returns the jobs handed a slot and 1 when more could go now.
local function hand_over(s, now)
  reclaim(s, now)
  local running = redis.call('ZCARD', s.holders)
  local handed, moved, bytes = 0, 0, 0
  while true do
    local head = redis.call('ZRANGE', s.parked, 0, 0, 'WITHSCORES')
    local score
    head, score = head[1], tonumber(head[2])
    if head == nil then return handed, 0 end
    if handed + moved >= K_HAND_OVER_BATCH or bytes >= K_HAND_OVER_BYTES then return handed, 1 end
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
      local list, packed = listed(s, jid)
      local others, refusing = {}, nil
      for _, e in ipairs(list or {}) do
        local o = listed_scope(e)
        if o.holders ~= s.holders then
          others[#others + 1] = o
          if not refusing and not room_for(o, jid, score, now) then refusing = o end
        end
      end
      redis.call('ZREM', s.parked, head)
      redis.call('HDEL', s.waits, jid)
      if list then redis.call('HDEL', others_key(s), jid) end
      if refusing then
        park_in(refusing, jid, run or '', head, score, packed)
        moved = moved + 1
      else
        redis.call('ZADD', s.holders, now + (finite(lease, 1) or K_DEFAULT_LEASE_MS), jid)
        redis.call('HSET', s.runs, jid, K_HANDED .. (run or ''))
        for _, o in ipairs(others) do
          redis.call('ZADD', o.holders, now + (finite(o.lease, 1) or K_DEFAULT_LEASE_MS), jid)
          redis.call('HSET', o.runs, jid, K_HANDED .. (run or ''))
        end
        redis.call('SADD', 'queues', job.queue)
        redis.call('RPUSH', 'queue:' .. job.queue, head)
        running, handed = running + 1, handed + 1
      end
    end
  end
end
