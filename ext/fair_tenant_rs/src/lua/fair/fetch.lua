-- Serves the threads of one process that want a job at the same moment, in one call: for each want in
-- turn, the next job from the first of its queues that has one (its own order of the queues: Sidekiq's
-- weights, shuffled per thread). From a fair queue: the next job in fair order, moved to the process's
-- in-flight list in the same step (a job is always in exactly one place). From a plain queue: RPOP, as
-- BasicFetch. The wants are served in exactly the order as many single calls would give: the first carries
-- the acknowledgements (and serves a tenant they woke, if its turn comes first), the tenants they woke and
-- it did not serve rejoin the rotation before the second, and each later want is a call without any.
-- Acknowledgements of jobs that finished since the last call come first (they ride along, so a job costs
-- a share of one round trip). Before both, a process missing from the registry registers again and takes
-- back the copies of its recovered jobs that still wait (ensure_registered): no fetch by a process that is
-- not registered for recovery, and none of a job the process is still running.
-- KEYS  inflight (this process's list), weights, registry (processes with in-flight lists), recovered
--       (copies of this process's recovered jobs)
-- ARGV  identity (this process), n, then n acknowledgements: in-flight field, timing pairs (timing "" unless
--       the job's queue is fair by worker time: charge_back's "<charged> <ran> <len>:<queue><member>"), then
--       q, then q base, queue, mode triples (base "" for a plain queue; mode "time" or ""), then the wants (at
--       most K_FETCH_BATCH), each a string: "1" when its thread already took a wake-up token, else "0",
--       followed by the order of its queues as 1-based indexes into the triples separated by commas
--       (nothing: the order given).
-- The wants are served until one finds nothing (the later ones would find nothing too), one finds a fair
-- queue with nothing in fair order but jobs in `queue:<name>` to adopt, or the jobs served reach
-- K_CALL_BYTES (a call stays bounded in bytes; each serve is bounded in turns, serve.lua).
-- An acknowledged job that held a concurrency slot gives it back (serve.lua's release_slot), and a tenant
-- that waited for it is served by this very call if its turn comes first; a served job takes its slot.
-- Returns {starved, soonest, empty, n, n later, then field, job, extras triples}, one flat reply (each element costs
-- a client time to read): starved: the fair queue that stopped the wants, with nothing in fair order but jobs
-- in `queue:<name>` to adopt, else false; soonest: when a want found nothing, the ms until a rate-capped tenant
-- of its queues may start, else false; empty: 1 when a want found nothing to serve (the wants after it would
-- find nothing either), else 0 (all served, or stopped by a starved queue or by K_CALL_BYTES: the caller calls
-- again for the rest); later: the fair queues that served a job while their `queue:<name>` holds jobs to adopt;
-- then one triple per want served, in the wants' order. From a fair queue: the job's in-flight field (what
-- acknowledges it: the job itself never comes back), the job, and "" or, when the job took a slot or its queue
-- is fair by worker time, "F<len>:<jid whose slot it took><len>:<charge, ms><member>" (each may be empty).
-- From a plain queue: "", the job and "P<queue>".
-- The in-flight hash (KEYS[1]) holds field -> job (names.rs INFLIGHT_PREFIX): a job's bytes cross Lua once on
-- the way in (its push) and once on the way out (here), and an acknowledgement costs the same whatever the
-- job's size or the number in flight.
local identity = ARGV[1]
local acks = tonumber(ARGV[2])
local at_queues = 3 + 2 * (acks or 0)
local queues = tonumber(ARGV[at_queues])
local first_want = at_queues + 1 + 3 * (queues or 0)
-- Checked before any write (Redis keeps what a failing script wrote).
if not acks or not queues or first_want > #ARGV + 1 or #ARGV - first_want + 1 > K_FETCH_BATCH then
  return redis.error_reply('ERR fetch: the counts of acknowledgements and queues must be numbers, and at most '
    .. K_FETCH_BATCH .. ' wants')
end
local woken_by_acks = {} -- tenants a released slot woke: served by this call if their turn comes first

-- The in-flight ids of this call's jobs (one INCRBY a call), taken before the first write: an INCRBY refused (the
-- counter overwritten by hand) raises before any job leaves its tenant.
local wants = #ARGV - first_want + 1
local ids = redis.call('INCRBY', K_INFLIGHT_SEQ_KEY, wants) - wants
local function next_id()
  ids = ids + 1
  return ids
end

ensure_registered(identity, KEYS[1], KEYS[3], KEYS[4], KEYS[2])

-- The acknowledgements' charges are corrected before any of their slots is released: a tenant a release
-- wakes is noted with its tag, corrected.
local dropped = {}
for i = 3, 1 + 2 * acks, 2 do
  -- A job that took a slot is read (its scope) before its field goes; others go unread.
  local job = inflight_slotted(ARGV[i]) and redis.call('HGET', KEYS[1], ARGV[i])
  local found = redis.call('HDEL', KEYS[1], ARGV[i]) == 1
  if found and ARGV[i + 1] ~= '' then charge_back(KEYS[2], ARGV[i + 1]) end
  if found and job then dropped[#dropped + 1] = job end
end
for _, job in ipairs(dropped) do release_slot(job, woken_by_acks) end

-- The queues, each read once a call: its keys, and whether `queue:<name>` holds jobs (for a fair queue).
local listed = {}
for i = 1, queues do
  local at = at_queues + 3 * i - 2
  local q = { base = ARGV[at], name = ARGV[at + 1] }
  if q.base ~= '' then
    q.k = fair_keys(q.base, KEYS[2])
    q.k.time = ARGV[at + 2] == K_FAIR_MODE_TIME
  end
  listed[i] = q
end
local function waiting(q)
  if q.waiting == nil then q.waiting = redis.call('LLEN', 'queue:' .. q.name) > 0 end
  return q.waiting
end

-- One want: its queues in its order; returns the served job's reply, or nil and the starved queue.
local function serve_want(woken, order)
  for index in order:gmatch('%d+') do
    local q = listed[tonumber(index)]
    if not q then return nil end
    if not q.k then
      local job = redis.call('RPOP', 'queue:' .. q.name)
      if job then return { '', job, 'P' .. q.name } end
    else
      q.k.put_back = 0 -- each want bounded as a single call is (serve)
      local tenant, job, held, charged, member = serve(q.k, q.name, false, woken_by_acks)
      if tenant then
        if not woken then q.tokens = (q.tokens or 0) + 1 end -- taken once a call
        local field = inflight_entry(q.name, tenant, next_id() .. (held and K_INFLIGHT_SLOT_MARK or ''))
        redis.call('HSET', KEYS[1], field, job)
        q.served = true
        if not held and not charged then return { field, job, '' } end
        local ms = charged and string.format('%.17g', charged) or ''
        held = held or ''
        return { field, job, served_extras(held, ms, charged and member or '') }
      elseif waiting(q) then
        return nil, q.name
      end
    end
  end
  return nil
end

local all = {}
for i = 1, queues do all[i] = i end
all = table.concat(all, ',')
local served, starved, bytes, unserved = {}, false, 0, false
for i = first_want, #ARGV do
  local order = ARGV[i]:sub(2)
  local reply
  reply, starved = serve_want(ARGV[i]:sub(1, 1) == '1', order == '' and all or order)
  settle(woken_by_acks) -- the first want's: the tenants its acknowledgements woke and it did not serve
  if not reply then
    if not starved then unserved = order == '' and all or order end
    break
  end
  served[#served + 1] = reply
  bytes = bytes + #reply[2]
  if bytes >= K_CALL_BYTES then break end
end
settle(woken_by_acks)
starved = starved or false
local later = {}
for _, q in ipairs(listed) do
  if q.k then count_taken(q.k) end
  if q.tokens then redis.call('RPOP', q.k.sig, q.tokens) end -- the wake-up tokens of the wants not woken
  if q.served and waiting(q) then later[#later + 1] = q.name end
end
-- A want not served: how long until a rate-capped tenant of its queues may start (ms), so an idle fetcher
-- does not sleep past it; else false.
local soonest = false
if unserved and not starved then
  for index in unserved:gmatch('%d+') do
    local q = listed[tonumber(index)]
    local due = q and q.k and rate_next(q.k)
    if due and (not soonest or due < soonest) then soonest = due end
  end
end
local reply = { starved, soonest, unserved and 1 or 0, #later }
for _, queue in ipairs(later) do reply[#reply + 1] = queue end
for _, job in ipairs(served) do
  reply[#reply + 1] = job[1]
  reply[#reply + 1] = job[2]
  reply[#reply + 1] = job[3]
end
return reply
