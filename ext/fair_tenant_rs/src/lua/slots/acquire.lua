-- Takes a slot for a run of a job about to run, or parks it, in one atomic step. Idempotent per run: a
-- re-sent call (its reply lost) never parks twice nor takes two slots. It may carry the release of the thread's
-- previous run (give_back.lua, done first: that job ended before this one began), so a thread running one
-- job after another pays one round trip per job; the pair is idempotent as each half is.
-- KEYS  holders, parked, limits, meta, tags, runs, waits, gone, waiting[, the carried release's 7 KEYS]
-- ARGV  jid, lease (ms), default limit, sub, tag, payload, enqueue score, run[, the carried release's 5 ARGV]
--       A release of the same scope, lease and default limit (the common case) carries only its jid and run: its
--       KEYS and the rest of its ARGV are this call's.
-- Returns {code, jobs the carried release handed a slot}. Codes: 0 acquired, 1 already held (handed over, or a
-- re-acquire), 2 parked, 3 dropped (a copy of a job that ran already, or a call of a run given up: nothing
-- taken), 4 acquired with room: a slot of the scope is still free and nobody waits for one (no parked job, no
-- fair-queue tenant), so this run's release may wait for the thread's next acquire (RELEASE_DEFER_MS at most).
local handed = 0
if #KEYS > 9 then
  handed = give_back({ unpack(KEYS, 10, 16) }, { unpack(ARGV, 9, 13) })
elseif #ARGV > 8 then
  handed = give_back({ KEYS[1], KEYS[2], KEYS[3], KEYS[9], KEYS[6], KEYS[7], KEYS[8] },
    { ARGV[9], ARGV[2], ARGV[3], ARGV[4], ARGV[10] })
end
local holders, parked, limits, meta, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local jid, run = ARGV[1], ARGV[8]
local now = now_ms()
local lease_until = now + (finite(ARGV[2], 1) or K_DEFAULT_LEASE_MS)
local s = { holders = holders, parked = parked, runs = KEYS[6], waits = KEYS[7], limits = limits, sub = ARGV[4],
            default = ARGV[3], lease = ARGV[2] }

-- This run was given up after its reply was lost (release.lua's forget), before this call came: it takes nothing.
if redis.call('HEXISTS', KEYS[8], run) == 1 then
  return { 3, handed }
end
-- A slot of this jid: this run's (re-sent), a handed-over one this run claims, or another run's.
local owner = redis.call('HGET', s.runs, jid)
local held = redis.call('ZSCORE', holders, jid)
if held and owner == K_DROPPED then
  -- The copy of a job whose run was given up after a lost reply, and ran: it frees its slot and is not run.
  redis.call('ZREM', holders, jid)
  redis.call('HDEL', s.runs, jid)
  hand_over(s, now)
  return { 3, handed }
end
-- This run parked, its reply was lost and its copy was handed over since: the re-sent call runs it, and takes
-- the copy back from its queue's tail (one of them runs).
if held and owner == K_HANDED .. run then
  local ok, job = pcall(cjson.decode, ARGV[6])
  -- (a payload that names no queue, sent by hand, can have no copy in one: nothing to take back)
  if ok and parked_job(job) then take_back(job.queue, ARGV[6]) end
end
if held and (owner == false or owner == run or string.sub(owner, 1, 1) == K_HANDED) then
  local parker = parking_run(owner, run) -- a copy handed over for another run that parked it
  if parker then mark_gone(KEYS[8], parker) end
  redis.call('ZADD', holders, lease_until, jid)
  redis.call('HSET', s.runs, jid, run)
  return { 1, handed }
end
if not held and owner then redis.call('HDEL', s.runs, jid) end -- a reclaimed lease's run
-- A parked job's terms are written and deleted with its payload: with nothing parked there are none to read.
local oldest = redis.call('ZRANGE', parked, 0, 0, 'WITHSCORES')
if oldest[1] ~= nil and terms(s, jid) == run then
  return { 2, handed } -- re-sent: parked already
end

-- Expired leases (a worker that died) are dropped only when they stand in the way: a scope with
-- free slots costs no reclaim. Another run of this jid holding a slot: this one parks (one slot per jid).
local limit = effective_limit(limits, ARGV[4], ARGV[3])
local free = limit - redis.call('ZCARD', holders)
if free <= 0 and reclaim(s, now) > 0 then
  free = limit - redis.call('ZCARD', holders)
end
local score = finite(ARGV[7]) or now -- the job's enqueue time (ms); unreadable (NaN, inf): now
if free > 0 and not held then
  if oldest[1] == nil or score < tonumber(oldest[2]) then
    redis.call('ZADD', holders, lease_until, jid)
    redis.call('HSET', s.runs, jid, run)
    if free > 1 and oldest[1] == nil and redis.call('EXISTS', KEYS[9]) == 0 then
      return { 4, handed }
    end
    return { 0, handed }
  end
end

-- No slot for this job (or older jobs wait for one): park it durably with its own terms, remember the scope
-- for the sweep, and hand any free slot to the oldest parked jobs.
redis.call('ZADD', parked, park_score(parked, score), ARGV[6])
redis.call('HSET', s.waits, jid, run .. K_META_SEPARATOR .. ARGV[3] .. K_META_SEPARATOR .. ARGV[2])
redis.call('HSET', meta, ARGV[4], ARGV[3] .. K_META_SEPARATOR .. ARGV[2])
redis.call('SADD', tags, ARGV[5])
if free > 0 then
  hand_over(s, now)
end
return { 2, handed }
