-- A run of a job of several concurrency scopes on a plain queue (issue 32): takes a slot in every scope at once,
-- or parks the job on the first scope that refuses, holding none (hand_over, common.lua, hands it every slot at
-- once or moves it on to the next scope that refuses). Idempotent per run: a re-sent call (its reply lost) never
-- parks twice nor takes two slots. Its release is release_all.lua (never carried by the next acquire).
-- KEYS  per scope, 8 (several.lua)
-- ARGV  jid, run, payload, enqueue score (ms), then per scope, 4 (several.lua)
-- Returns {code, 0}: 0 acquired, 1 held already (this run's, or handed over), 2 parked, 3 dropped (a copy of a
-- job that ran already, or a call of a run given up: nothing taken).
local jid, run, payload = ARGV[1], ARGV[2], ARGV[3]
local scopes = several(5)
local now = now_ms()
local score = finite(ARGV[4]) or now -- the job's enqueue time (ms); unreadable (NaN, inf): now
for _, s in ipairs(scopes) do
  if not (finite(s.lease, 1) and finite(s.default, 0)) then
    return redis.error_reply('acquire_all: lease and default limit must be numbers')
  end
end

-- This run was given up after its reply was lost (release_all.lua's forget), before this call came.
if redis.call('HEXISTS', scopes[1].gone, run) == 1 then
  return { 3, 0 }
end

local owners, held, dropped, mine = {}, {}, false, true
for i, s in ipairs(scopes) do
  owners[i] = redis.call('HGET', s.runs, jid)
  held[i] = redis.call('ZSCORE', s.holders, jid)
  if held[i] and owners[i] == K_DROPPED then dropped = true end
  if not (held[i] and (owners[i] == false or owners[i] == run or string.sub(owners[i], 1, 1) == K_HANDED)) then
    mine = false
  end
end
-- The copy of a job whose run was given up after a lost reply, and ran: it frees its slots and is not run.
if dropped then
  for i, s in ipairs(scopes) do
    if held[i] and owners[i] == K_DROPPED then free_as(s, jid, K_DROPPED) end
  end
  return { 3, 0 }
end
-- Every slot is this run's (re-sent) or handed over (this run parked it, or another fetched the copy): it runs.
-- This run parked, its reply was lost and its copy was handed over since: the copy is taken back from its
-- queue's tail (one of them runs).
if mine then
  for i = 1, #scopes do
    if owners[i] == K_HANDED .. run then
      local ok, job = pcall(cjson.decode, payload)
      if ok and parked_job(job) then take_back(job.queue, payload) end
      break
    end
  end
  for i = 1, #scopes do -- a copy handed over for another run that parked it (its parking run is in every scope)
    local parker = parking_run(owners[i], run)
    if parker then
      mark_gone(scopes[1].gone, parker)
      break
    end
  end
  for _, s in ipairs(scopes) do
    redis.call('ZADD', s.holders, now + finite(s.lease, 1), jid)
    redis.call('HSET', s.runs, jid, run)
  end
  return { 1, 0 }
end
-- Parked already by this run (re-sent).
for _, s in ipairs(scopes) do
  if terms(s, jid) == run then return { 2, 0 } end
end
-- Some slots of this jid but not all (a lease reclaimed since a hand-over): given back, and asked for again
-- with the rest (handed over to others if this job parks); a reclaimed lease's run is forgotten.
local freed = {}
for i, s in ipairs(scopes) do
  if held[i] and (owners[i] == false or owners[i] == run or string.sub(owners[i], 1, 1) == K_HANDED) then
    redis.call('ZREM', s.holders, jid)
    redis.call('HDEL', s.runs, jid)
    freed[#freed + 1] = s
  elseif not held[i] and owners[i] then
    redis.call('HDEL', s.runs, jid)
  end
end

local refusing
for _, s in ipairs(scopes) do
  if not room_for(s, jid, score, now) then
    refusing = s
    break
  end
end
if not refusing then
  for _, s in ipairs(scopes) do
    redis.call('ZADD', s.holders, now + finite(s.lease, 1), jid)
    redis.call('HSET', s.runs, jid, run)
  end
  return { 0, 0 }
end
local list = {}
for i, s in ipairs(scopes) do
  list[i] = { string.sub(s.holders, 1, #s.holders - #s.sub - #K_HOLDERS), s.sub, s.limits, s.default, s.lease, s.tag }
end
park_in(refusing, jid, run, payload, park_score(refusing.parked, score), cmsgpack.pack(list))
-- (refused for an older parked job while a slot is free: the oldest go now; so do those of a scope whose partial
-- hold was given back above)
hand_over(refusing, now)
for _, s in ipairs(freed) do
  if s.holders ~= refusing.holders then hand_over(s, now) end
end
return { 2, 0 }
