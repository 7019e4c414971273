-- Deletes a fair queue's backlog (Sidekiq::Queue#clear, the Queues page's Delete), `max` tenants per call (and
-- no more once K_CALL_BYTES of jobs were read, past the first tenant): every waiting job of a tenant (held
-- back by a cap or not) with its place in the scheduling state (ready, capped or over and its waiting entry on
-- its scope, paused, heads), so the state is whole between calls and a job pushed meanwhile is either deleted
-- with its tenant or kept. A list is UNLINKed (freed outside the script). Jobs in flight are not touched (their
-- slots are given back with their acknowledgements). The caller calls again until done.
--
-- A clear is recorded in K_FAIR_CLEARING_KEY (queue -> "<cut> <activations> <clear> <step> <offset>": Redis's
-- time and the state's activations counter at its first call, the caller's id for the clear, then a finishing
-- sweep's cursor) by its first call, before anything is deleted (a newer clear's first call replaces it: it
-- covers the older); the call that finds nothing left removes the record. A clear cut short (its caller
-- killed, a call refused) keeps its record, and a recovery sweep finishes it in mode `cut`: a tenant is deleted
-- whole only when it was activated by the cut (its member's prefix) and the last job of its list (pushes
-- append there) was enqueued at or before the cut (a paused tenant: the time alone); any other tenant is kept
-- whole, its jobs from before the cut included. Kept is the safe side: a job pushed after the clear began is
-- never deleted, and a job the clear would have deleted may run instead. The walk goes through ready, capped,
-- over, rated (by rank), then paused (SSCAN); kept tenants are stepped over, so the walk ends. A tenant in heads
-- alone (a state half-made by hand) is kept. A cut-mode call whose record is gone or holds another cut (a newer
-- clear began: it covers this one) writes nothing and ends the walk; a record it cannot read is removed. The
-- counter of waiting jobs and the wake-up tokens are left as they are (kept tenants may wait).
-- KEYS  (none)
-- ARGV  base, queue, max (tenants, an integer from 1), mode: 'begin' (a clear's first call: records it; the
--       default), 'next' (its later calls) or 'cut' (a sweep), then for 'begin' the clear's id (letters, digits,
--       '_' and '-'; none: '-', each first call records anew), for 'cut' the record as the sweep read it
-- Returns {jobs deleted, 1 when more may be left else 0}.
local k = fair_keys(ARGV[1], '')
local queue, max, mode = ARGV[2], finite(ARGV[3], 1, 1e9), ARGV[4] or 'begin'
local id = mode == 'begin' and ARGV[5] or '-' -- a clear without an id: every first call records anew
if not max or max % 1 ~= 0 or (mode ~= 'begin' and mode ~= 'next' and mode ~= 'cut')
    or not string.match(id, '^[%w_-]+$') then
  return redis.error_reply("ERR clear: max must be an integer from 1, mode 'begin', 'next' or 'cut', an id a word")
end
local deleted, tenants, read = 0, 0, 0
local steps = { k.ready, k.capped, k.over, k.rated, k.paused }

local function room()
  return tenants < max and read < K_CALL_BYTES
end

-- A record: "<cut> <activations> <clear> <step> <offset>". The cut as written (compared as text); the
-- activations counter at the cut, as a member's prefix (a tenant whose member is past it entered the rotation
-- after the cut); the id its caller gave the clear; the step (1 to #steps + 1) and the offset (a rank, or an
-- SSCAN cursor kept as text: it may pass 2^53). nil for a cut that is not a finite number or activations that
-- are not a member's prefix (a record written by hand). A cursor that cannot be read starts the walk again.
local function parse_record(record)
  local cut, seq, id, step, offset = string.match(record or '', '^(%S+) (%x+) (%S+) ?(%S*) ?(%S*)$')
  if not finite(cut, 0) or #seq ~= K_ACTIVATION_DIGITS then return nil end
  step = finite(step, 1, #steps + 1)
  if not step or step % 1 ~= 0 or not string.match(offset, '^%d+$') then return cut, seq, id, 1, '0' end
  return cut, seq, id, step, offset
end

local function drop(tenant)
  local list = k.prefix .. tenant
  local len = redis.call('LLEN', list)
  if len > 0 then
    redis.call('UNLINK', list)
    redis.call('HINCRBY', k.state, K_STATE_N, -len)
    deleted = deleted + len
  end
  redis.call('ZREM', k.heads, tenant)
  redis.call('HDEL', k.members, tenant)
  tenants = tenants + 1
end

-- A member of a tier out of the state with its tenant (a held-back tenant's waiting entry on its scope too).
local function drop_member(tier, member)
  local tenant = member_tenant(member)
  if tier ~= k.ready then
    local head = redis.call('LINDEX', k.prefix .. tenant, 0)
    read = read + (head and #head or 0)
    local slot = slot_of(head)
    for _, s in ipairs(slot and scopes(slot) or {}) do wait_rem(s.waiting, waiting_entry(k, queue, tier, member)) end
  end
  redis.call('ZREM', tier, member)
  if tier == k.rated then redis.call('HDEL', k.rtags, member) end
  drop(tenant)
end

-- Cut mode: whether a tenant's list holds only jobs enqueued at or before `cut` (its last job is the newest;
-- an unreadable time counts as now: kept). An empty list holds nothing to keep. The enqueue time is the pushing
-- client's clock, the cut Redis's: see RELIABILITY.md.
local function before_cut(tenant, cut)
  local last = redis.call('LINDEX', k.prefix .. tenant, -1)
  if not last then return true end
  read = read + #last
  return job_time(last) <= cut
end

-- Cut mode, one step of the walk from `offset`: returns the offset to go on from, and whether the step is done.
-- An SSCAN may return more than asked (a small set comes whole): when the call runs out of room within it, the
-- same cursor is scanned again if this call deleted a tenant from it (the rest is met then), else the rest is
-- passed over (kept), so every call deletes a tenant or moves on.
local function cut_step(tier, cut, seq, offset)
  if tier == k.paused then
    local reply = redis.call('SSCAN', tier, offset, 'COUNT', max - tenants)
    local dropped = 0
    for _, tenant in ipairs(reply[2]) do
      if not room() then
        if dropped > 0 then return offset, false end
        break
      end
      if before_cut(tenant, cut) then
        redis.call('SREM', tier, tenant)
        drop(tenant)
        dropped = dropped + 1
      else
        tenants = tenants + 1
      end
    end
    return reply[1], reply[1] == '0'
  end
  local want = max - tenants
  local rank = tonumber(offset)
  local listed = redis.call('ZRANGE', tier, rank, rank + want - 1)
  for _, member in ipairs(listed) do
    if not room() then return rank, false end
    -- activated after the cut: its list was empty since, so every job in it came after the clear began
    if member:sub(1, K_ACTIVATION_DIGITS) <= seq and before_cut(member_tenant(member), cut) then
      drop_member(tier, member)
    else
      rank, tenants = rank + 1, tenants + 1
    end
  end
  return rank, #listed < want
end

if mode == 'cut' then
  local stored = redis.call('HGET', K_FAIR_CLEARING_KEY, queue)
  local cut, seq, id, step, offset = parse_record(stored)
  local wanted = parse_record(ARGV[5])
  if not cut then -- gone, or unreadable (nothing is deleted by a record nobody can read)
    if stored then redis.call('HDEL', K_FAIR_CLEARING_KEY, queue) end
    return { 0, 0 }
  end
  if cut ~= wanted then return { 0, 0 } end
  local at = tonumber(cut)
  while room() and step <= #steps do
    local done
    offset, done = cut_step(steps[step], at, seq, offset)
    if done then step, offset = step + 1, '0' end
  end
  if step > #steps then -- the counter and the wake-up tokens stay: kept tenants may still wait
    redis.call('HDEL', K_FAIR_CLEARING_KEY, queue)
    return { deleted, 0 }
  end
  redis.call('HSET', K_FAIR_CLEARING_KEY, queue, table.concat({ cut, seq, id, step, offset }, ' '))
  return { deleted, 1 }
end

-- The first call records the clear, unless the record is its own already: the same call sent again after a lost
-- reply keeps the cut it wrote (a later cut would let a finishing sweep delete what was pushed in between).
local function recorded_by(clear) -- whether the queue's record is this clear's
  return clear ~= '-' and select(3, parse_record(redis.call('HGET', K_FAIR_CLEARING_KEY, queue))) == clear
end
if mode == 'begin' and not recorded_by(id) then
  local now = redis.call('TIME')
  local cut = now[1] .. '.' .. string.format('%06d', tonumber(now[2]))
  local seq = finite(redis.call('HGET', k.state, K_STATE_SEQ), 0) or 0
  seq = string.format('%0' .. K_ACTIVATION_DIGITS .. 'x', seq)
  redis.call('HSET', K_FAIR_CLEARING_KEY, queue, table.concat({ cut, seq, id }, ' '))
end
for _, tier in ipairs({ k.ready, k.capped, k.over, k.rated }) do
  if not room() then break end
  for _, member in ipairs(redis.call('ZRANGE', tier, 0, max - tenants - 1)) do
    if not room() then break end
    drop_member(tier, member)
  end
end
if room() then
  for _, tenant in ipairs(redis.call('SPOP', k.paused, max - tenants)) do
    drop(tenant)
  end
end
if room() then -- tenants in heads alone (a state left half-made by hand)
  for _, tenant in ipairs(redis.call('ZRANGE', k.heads, 0, max - tenants - 1)) do
    drop(tenant)
  end
end
if room() then -- nothing left: every clear of this queue is done, whichever began it
  redis.call('DEL', k.sig, k.rtags, k.members)
  redis.call('HSET', k.state, K_STATE_N, 0)
  redis.call('HDEL', K_FAIR_CLEARING_KEY, queue)
  return { deleted, 0 }
end
return { deleted, 1 }
