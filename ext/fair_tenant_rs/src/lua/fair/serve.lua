-- Concurrency caps inside fair queues, and the serving rule that honours them (after slots/common.lua and
-- fair/common.lua; the Rust model is CappedSfq in fair/caps.rs, run side by side with these scripts by the
-- lockstep test, fair/lockstep.rs).
--
-- A job pushed to a fair queue by a class with `fair_tenant_concurrency` carries its slot (FairPush) in its
-- K_SLOT_FIELD field: [tag, sub, default limit, lease ms, elastic 0/1] (positions K_SLOT_TAG ... K_SLOT_ELASTIC)
-- Its slot is taken when it is served (its jid joins the scope's holders with a lease, as the server
-- middleware's acquire does for other queues) and given back with its acknowledgement, requeue or recovery.
-- No job is parked or fetched twice: a tenant whose next job cannot take its slot leaves the rotation.
--   fair queue `capped` / `over`  where it waits (fair/common.lua), keeping its start tag
--   <slots base><sub>:waiting  ZSET  "c|o<len>:<queue><ready member>" -> start tag: who waits on the scope
--                                    (c: in `capped`, o: in `over`)
--   <that key>:index           HASH  "<len>:<queue><tenant>" -> the tenant's entry there: every script that
--                                    adds or removes an entry keeps it (wait_add, wait_rem, unindex), so a
--                                    requeue or a removal finds a tenant's entry in O(1), however many wait
-- A release, an expired lease (the sweep) or a raised runtime limit brings waiting tenants back into
-- `ready` (start tag max(theirs, v): a wait banks no credit). The scope is registered in the tag's meta
-- hash and the tags set while it has holders or waiters, so the slot sweep visits it.

local function scope_keys(tag, sub)
  local base = K_SLOTS_PREFIX .. #tag .. ':' .. tag .. ':'
  return { holders = base .. sub .. K_HOLDERS, waiting = base .. sub .. K_WAITING, runs = base .. sub .. K_RUNS,
           meta = base .. K_META, limits = K_LIMITS_PREFIX .. #tag .. ':' .. tag, more = {} }
end

-- A waiting entry's field in its scope's index: "<len>:<queue><tenant>", or nil (not an entry this gem wrote).
local function wait_field(entry)
  local qlen, at = entry:match('^[co](%d+):()')
  if not qlen then return nil end
  local q_end = at + tonumber(qlen) - 1
  return entry:sub(2, q_end) .. member_tenant(entry:sub(q_end + 1))
end

-- An entry joins (or moves within) a scope's waiting set, with its index field.
local function wait_add(waiting, tag, entry)
  redis.call('ZADD', waiting, tag, entry)
  local field = wait_field(entry)
  if field then redis.call('HSET', waiting .. K_WAITING_INDEX, field, entry) end
end

-- An entry that left the waiting set (popped, removed) leaves the index, unless the field names another.
local function unindex(waiting, entry)
  local field = wait_field(entry)
  local index = waiting .. K_WAITING_INDEX
  if field and redis.call('HGET', index, field) == entry then redis.call('HDEL', index, field) end
end

local function wait_rem(waiting, entry)
  if redis.call('ZREM', waiting, entry) == 1 then unindex(waiting, entry) end
end

-- The waiting entry of `queue`'s `tenant` on a scope, or nil: its index field, else, while the index holds
-- fewer fields than the set has entries (some written by a version without it), a read of the entries if they
-- are at most K_WAITING_SCAN_MAX.
local function wait_lookup(waiting, queue, tenant)
  local prefix, index = #queue .. ':' .. queue, waiting .. K_WAITING_INDEX
  local entry = redis.call('HGET', index, prefix .. tenant)
  if entry then
    if redis.call('ZSCORE', waiting, entry) then return entry end
    redis.call('HDEL', index, prefix .. tenant) -- a field left behind: forgotten
  end
  local entries = redis.call('ZCARD', waiting)
  if entries > K_WAITING_SCAN_MAX or redis.call('HLEN', index) >= entries then return nil end
  for _, e in ipairs(redis.call('ZRANGE', waiting, 0, -1)) do
    if e:sub(2, #prefix + 1) == prefix and member_tenant(e:sub(#prefix + 2)) == tenant then return e end
  end
  return nil
end

local SLOT_QUOTED = '"' .. K_SLOT_FIELD .. '"'
-- The longest lease or rate window (ms) a job may carry: about 300 years, and a whole number Redis reads
-- back (PEXPIRE refuses 1e+15).
local MAX_MS = 1e13
-- The first bytes of a job FairPush wrote: enqueue time, jid, then its slot if it has one (common.lua).
local HEAD = '^{"enqueued_at":[%d%.eE+-]+,"jid":"([%w_%-]*)",()'
local HEAD_SLOT = '^' .. SLOT_QUOTED:gsub('%p', '%%%0') .. ':()%['

-- The JSON array of a job FairPush wrote, starting at `from`: the shortest run to `closer` that decodes as an
-- array (a tag or sub may hold a `]`); nil when none does within a few tries. Returns it and its last byte.
local function head_array(job, from, closer)
  local close = from
  for _ = 1, 8 do
    close = string.find(job, closer, close + 1, true)
    if not close then return nil end
    close = close + #closer - 1
    local ok, s = pcall(cjson.decode, string.sub(job, from, close))
    if ok and type(s) == 'table' then return s, close end
  end
  return nil
end

local function head_slot(job, from)
  return head_array(job, from, ']')
end

local MORE_QUOTED = '"' .. K_SLOT_MORE_FIELD .. '"'
local HEAD_MORE = '^' .. MORE_QUOTED:gsub('%p', '%%%0') .. ':()%['

-- One scope as a job carries it ([tag, sub, limit, lease, elastic]), for the job `jid`, or nil (unreadable).
-- Limit and lease as FairPush writes them; unreadable (NaN, inf, below 0 / 1 ms) the defaults; a lease over
-- MAX_MS is MAX_MS.
local function scope_slot(s, jid)
  if type(s) ~= 'table' or type(s[K_SLOT_TAG]) ~= 'string' or type(s[K_SLOT_SUB]) ~= 'string' then return nil end
  local slot = scope_keys(s[K_SLOT_TAG], s[K_SLOT_SUB])
  slot.tag, slot.sub, slot.jid = s[K_SLOT_TAG], s[K_SLOT_SUB], jid
  local lease = finite(s[K_SLOT_LEASE], 1)
  slot.default = finite(s[K_SLOT_LIMIT], 0) or K_DEFAULT_LIMIT
  slot.lease = lease and math.min(lease, MAX_MS) or K_DEFAULT_LEASE_MS
  slot.elastic = s[K_SLOT_ELASTIC] == 1 or s[K_SLOT_ELASTIC] == true
  return slot
end

-- A job's scopes after its first (K_SLOT_MORE_FIELD), onto `slot.more`: unreadable ones and repeats of an
-- earlier scope are passed over, and at most K_MAX_CONCURRENCY_SCOPES are kept in all.
local function add_more(slot, more)
  if type(more) ~= 'table' then return end
  local seen = { [slot.holders] = true }
  for _, s in ipairs(more) do
    if #slot.more + 1 >= K_MAX_CONCURRENCY_SCOPES then break end
    local extra = scope_slot(s, slot.jid)
    if extra and not seen[extra.holders] then
      seen[extra.holders] = true
      slot.more[#slot.more + 1] = extra
    end
  end
end

-- The slot a job of a fair queue takes, or nil; the job starts at `at` (default 1: an in-flight entry's job
-- is read in place). A job FairPush wrote says so in its first bytes; others cost a substring search, and
-- those with a slot a decoding. A job with several scopes (`fair_tenant_concurrency: [...]`) has the others
-- in `slot.more` (scopes(slot) lists them all); it starts only when all have room, and takes them together.
-- Also returns where the slot fields end in a job FairPush wrote (rate_of reads on from there).
local function slot_of(job, at)
  if not job then return nil end
  at = at or 1
  local s, jid, more, close
  local head_jid, after = string.match(job, HEAD, at)
  if head_jid then
    local from = string.match(job, HEAD_SLOT, after)
    if not from then return nil end
    s, close = head_slot(job, from)
    jid = head_jid
    if close then
      local more_from = string.match(job, HEAD_MORE, close + 2)
      if more_from then more, close = head_array(job, more_from, ']]') end
    end
  end
  if not s then
    if not string.find(job, SLOT_QUOTED, at, true) then return nil end
    local ok, decoded = pcall(cjson.decode, at == 1 and job or string.sub(job, at))
    if not ok or type(decoded) ~= 'table' or decoded.jid == nil then return nil end
    s, jid, more = decoded[K_SLOT_FIELD], decoded.jid, decoded[K_SLOT_MORE_FIELD]
  end
  -- A jid that is no string or number names no holder (a slot taken for it could never be given back).
  if type(jid) ~= 'string' and type(jid) ~= 'number' then return nil end
  local slot = scope_slot(s, tostring(jid))
  if not slot then return nil end
  add_more(slot, more)
  return slot, close
end

-- Every scope of a job's slot, its first first.
local function scopes(slot)
  if #slot.more == 0 then return { slot } end
  local all = { slot }
  for _, s in ipairs(slot.more) do all[#all + 1] = s end
  return all
end

-- Rate caps (`fair_tenant_rate`; the Rust model is fair/rate.rs). A job FairPush wrote carries, after its
-- slot, K_RATE_FIELD: [tag, sub, limit, per ms, limit, per ms, ...]. The scope's windows live in one hash
-- (K_RATE_PREFIX<len>:<tag>:<sub>): K_RATE_SEEN, the greatest Redis time it has seen (its clock never goes
-- back), and per window length (ms) its live buckets "number:count:last,..." (per / K_RATE_BUCKETS wide; a
-- start counts while its bucket's last start is inside the window: never over, at most a bucket too long).
local RATE_QUOTED = '"' .. K_RATE_FIELD .. '"'
local HEAD_RATE = '^' .. RATE_QUOTED:gsub('%p', '%%%0') .. ':()%['

local RATE_MORE_QUOTED = '"' .. K_RATE_MORE_FIELD .. '"'
local HEAD_RATE_MORE = '^' .. RATE_MORE_QUOTED:gsub('%p', '%%%0') .. ':()%['

-- One rate scope as a job carries it ([tag, sub, limit, per ms, ...]), with a runtime override's windows in place
-- of its own: {key, tag, sub, windows = {{limit, per}, ...}}, or nil (unreadable, or no window left).
local function rate_scope(r)
  if type(r) ~= 'table' or type(r[1]) ~= 'string' or type(r[2]) ~= 'string' then return nil end
  local rate = { key = K_RATE_PREFIX .. #r[1] .. ':' .. r[1] .. ':' .. r[2], tag = r[1], sub = r[2], windows = {},
                 more = {} }
  -- A runtime override (Rates: the scope's own field, else the tag's K_ALL_SCOPES) replaces the job's windows.
  local over = redis.call('HMGET', K_RATE_LIMITS_PREFIX .. #r[1] .. ':' .. r[1], r[2], K_ALL_SCOPES)
  local text = over[1] or over[2]
  if text then
    r = { r[1], r[2] }
    for limit, per in string.gmatch(text, '(%d+):(%d+)') do
      r[#r + 1], r[#r + 2] = limit, per
    end
  end
  -- A window whose limit is not a number from 0 up, or whose length is not a number from 1 ms up, is passed
  -- over; a length is taken in whole ms, at most MAX_MS (the key's PEXPIRE refuses a fraction, and 1e+15).
  for i = 3, #r - 1, 2 do
    local limit, per = finite(r[i], 0), finite(r[i + 1], 1)
    if limit and per then rate.windows[#rate.windows + 1] = { limit, math.floor(math.min(per, MAX_MS)) } end
  end
  if #rate.windows == 0 then return nil end
  return rate
end

-- The rate cap a job of a fair queue is held to, or nil: its first readable scope, the others (K_RATE_MORE_FIELD:
-- `key:` per window; unreadable ones and repeats passed over, at most K_MAX_CONCURRENCY_SCOPES in all) in
-- `rate.more` (rates(rate) lists them all). A job starts only when every one allows it.
local function rate_of(job, at)
  if not job then return nil end
  at = at or 1
  local r, more
  local head_jid, after = string.match(job, HEAD, at)
  -- The head's arrays are read by the shortest run that decodes (a tag or sub may hold a `]`); when one does not
  -- within head_array's tries, the whole job is decoded instead, as for a job FairPush did not write.
  if head_jid then
    local _, close
    local from = string.match(job, HEAD_SLOT, after)
    if from then
      _, close = head_slot(job, from)
      local more_slots = close and string.match(job, HEAD_MORE, close + 2)
      if more_slots then _, close = head_array(job, more_slots, ']]') end
      after = close and close + 2 -- past "],"
    end
    from = after and string.match(job, HEAD_RATE, after)
    if after and not from then return nil end -- FairPush writes the rate next: this job has none
    if from then r, close = head_array(job, from, ']') end
    local more_from = close and string.match(job, HEAD_RATE_MORE, close + 2)
    if more_from then more, close = head_array(job, more_from, ']]') end
    if not close then head_jid = nil end
  end
  if not head_jid then
    if not string.find(job, RATE_QUOTED, at, true) then return nil end
    local ok, decoded = pcall(cjson.decode, at == 1 and job or string.sub(job, at))
    if ok and type(decoded) == 'table' then r, more = decoded[K_RATE_FIELD], decoded[K_RATE_MORE_FIELD] end
  end
  local rate = rate_scope(r)
  if type(more) ~= 'table' then return rate end
  local seen = { [rate and rate.key or ''] = true }
  for _, m in ipairs(more) do
    if rate and #rate.more + 1 >= K_MAX_CONCURRENCY_SCOPES then break end
    local extra = rate_scope(m)
    if extra and not seen[extra.key] then
      seen[extra.key] = true
      if rate then rate.more[#rate.more + 1] = extra else rate = extra end
    end
  end
  return rate
end

-- Every scope of a job's rate cap, its first first.
local function rates(rate)
  if #rate.more == 0 then return { rate } end
  local all = { rate }
  for _, r in ipairs(rate.more) do all[#all + 1] = r end
  return all
end

local function rate_buckets(text)
  local list = {}
  for number, count, last in string.gmatch(text or '', '(%d+):(%d+):(%d+)') do
    list[#list + 1] = { tonumber(number), tonumber(count), tonumber(last) }
  end
  return list
end

-- Reads the scope's windows at Redis's time (never behind the scope's). Returns the scope's time, the
-- earliest instant (ms) the job may start when it may not now (nil: it may), and the buckets read.
local function rate_check(rate)
  local fields = { K_RATE_SEEN }
  for i, w in ipairs(rate.windows) do fields[i + 1] = w[2] end
  local got = redis.call('HMGET', rate.key, unpack(fields))
  local now = now_ms()
  local seen = tonumber(got[1])
  if seen and seen > now then now = seen end
  local due, read = nil, {}
  for i, w in ipairs(rate.windows) do
    local limit, per = w[1], w[2]
    local live, count = {}, 0
    for _, b in ipairs(rate_buckets(got[i + 1])) do
      if b[3] + per > now then
        live[#live + 1] = b
        count = count + b[2]
      end
    end
    read[per] = live
    if count >= limit then
      table.sort(live, function(a, b) return a[3] < b[3] end)
      local at = math.huge -- a limit of 0: never (until the option changes)
      for _, b in ipairs(live) do
        count = count - b[2]
        if count < limit then
          at = b[3] + per
          break
        end
      end
      if due == nil or at > due then due = at end
    end
  end
  return now, due, read
end

-- A start at `now` (the scope's time) counted in each window length once.
local function rate_record(rate, now, read)
  local args, longest = { K_RATE_SEEN, now }, 0
  for per, live in pairs(read) do
    local number = math.floor(now * K_RATE_BUCKETS / per)
    local found = false
    local parts = {}
    for _, b in ipairs(live) do
      if b[1] == number then
        b[2], b[3], found = b[2] + 1, now, true
      end
      parts[#parts + 1] = b[1] .. ':' .. b[2] .. ':' .. b[3]
    end
    if not found then parts[#parts + 1] = number .. ':1:' .. now end
    args[#args + 1] = per
    args[#args + 1] = table.concat(parts, ',')
    if per > longest then longest = per end
  end
  redis.call('HSET', rate.key, unpack(args))
  redis.call('PEXPIRE', rate.key, longest + K_DEFAULT_LEASE_MS)
end

-- Every scope of a job's rate cap read (rate_check each): the checks ({scope, its time, the buckets read, the
-- instant it allows the start or nil}), and the latest instant one of them allows
-- the start (nil: all allow it now).
local function rates_check(rate)
  local checks, due = {}, nil
  for i, r in ipairs(rates(rate)) do
    local now, at, read = rate_check(r)
    checks[i] = { r, now, read, at }
    if at and (due == nil or at > due) then due = at end
  end
  return checks, due
end

-- A start counted in every scope rates_check read.
local function rates_record(checks)
  for _, c in ipairs(checks) do rate_record(c[1], c[2], c[3]) end
end

-- A tenant whose next job would start over a window leaves `from` for `rated` until `due`, keeping its
-- start tag.
local function hold_rated(k, from, member, tag, due)
  redis.call('ZREM', from, member)
  if due == math.huge then due = '+inf' end
  redis.call('ZADD', k.rated, due, member)
  redis.call('HSET', k.rtags, member, tag)
end

-- Rate-capped tenants whose instant came (all of them when `all`: draining) rejoin `ready` at start tag
-- max(theirs, v), at most K_RATE_WAKE_BATCH a call, an idle fetcher woken for each.
local function rate_wake(k, all)
  local due = redis.call('ZRANGEBYSCORE', k.rated, '-inf', all and '+inf' or now_ms(), 'LIMIT', 0, K_RATE_WAKE_BATCH)
  if #due == 0 then return end
  local tags = redis.call('HMGET', k.rtags, unpack(due))
  local v = vtime(k)
  for i, member in ipairs(due) do
    local tag = finite(tags[i]) or v
    redis.call('ZADD', k.ready, tag > v and tag or v, member)
  end
  redis.call('ZREM', k.rated, unpack(due))
  redis.call('HDEL', k.rtags, unpack(due))
  add_tokens(k, #due, K_TOKEN_CAP)
end

-- How long (ms, at least 1) until the first rate-capped tenant of `k` may start, or nil.
local function rate_next(k)
  local first = redis.call('ZRANGE', k.rated, 0, 0, 'WITHSCORES')
  if #first == 0 or first[2] == 'inf' then return nil end
  return math.max(math.ceil(tonumber(first[2]) - now_ms()), 1)
end


local function same_scope(a, b)
  return a ~= nil and b ~= nil and a.tag == b.tag and a.sub == b.sub
end

-- A string's rest after `prefix`, or nil.
local function after(s, prefix)
  if s:sub(1, #prefix) == prefix then return s:sub(#prefix + 1) end
  return nil
end

-- What a scope's tag and sub name (the stats and why scripts show it) (slots.rs: a tenant's tag with a queue's sub, or a key's tag and sub).
local function scope_of(slot)
  local tenant, queue = after(slot.tag, K_TENANT_TAG), after(slot.sub, K_QUEUE_SUB)
  if tenant and queue then
    return { 'tenant', tenant, queue }
  end
  local key = after(slot.tag, K_KEY_TAG)
  if key and slot.sub == K_KEY_SUB then
    return { 'key', key }
  end
  return false
end

-- The scope's sweep registration (as acquire.lua does for parked jobs): "default limit lease" per sub.
local function register(slot)
  redis.call('HSET', slot.meta, slot.sub, slot.default .. K_META_SEPARATOR .. slot.lease)
  redis.call('SADD', K_SLOT_TAGS_KEY, slot.tag)
end

-- A slot a fair-queue job holds belongs to no run of a plain queue's (slots/common.lua's runs): one recorded for
-- its jid (a run whose lease ran out, dropped by a reclaim that leaves runs as they are, or a run whose slot this
-- copy now shares) is forgotten, so that run's late release frees nothing of this job's (give_back.lua).
local function unowned(slot)
  redis.call('HDEL', slot.runs, slot.jid)
end

-- Takes the job's slot when its scope has room; past the limit when `beyond` (an elastic cap served from
-- the over tier; never with a limit of 0, which halts). `known`: {slot, limit, running} read earlier in the
-- same call (a release that woke this tenant), which spares reading them again; only when this job carries
-- the same default limit (classes sharing a key may carry different ones, and each job is held to its own),
-- and while no job of several scopes took slots in the call (its other scopes' counts moved: several_taken).
-- A copy of a job whose jid holds its scope's slot (a lease not run out) is not served while it does, whatever
-- the room: two copies running at once would share one holder, and the first to end would free the slot while
-- the other runs (the scope one past its limit). A slot handed to the jid by a plain queue's release
-- (K_HANDED, or K_DROPPED once given up: it waits for this copy, adopted from `queue:<name>`) is this copy's
-- own: taken over, as before.
-- A job with several scopes takes them all or none: each is checked in order (as above), and the first that
-- refuses is where its tenant waits (hold_back); only when every one has room are they all taken.
-- Returns taken, holders after and the limit (of the first scope when taken, else of the one that refused),
-- whether it was refused as such a copy, and the scope that refused.
local function room(slot, beyond, known, now)
  local limit, running
  if known and not several_taken and same_scope(slot, known.slot) and slot.default == known.slot.default
     and known.running < known.limit then
    limit, running = known.limit, known.running
  else
    limit = effective_limit(slot.limits, slot.sub, slot.default)
    running = redis.call('ZCARD', slot.holders)
  end
  local lease = tonumber(redis.call('ZSCORE', slot.holders, slot.jid))
  if lease and lease > now then
    local owner = redis.call('HGET', slot.runs, slot.jid)
    if not owner or (owner ~= K_DROPPED and string.sub(owner, 1, #K_HANDED) ~= K_HANDED) then
      return false, running, limit, true
    end
  end
  if running >= limit and not (beyond and slot.elastic and limit > 0) then
    -- Expired leases (a killed worker) are dropped only when they stand in the way.
    if redis.call('ZREMRANGEBYSCORE', slot.holders, '-inf', now) > 0 then
      running = redis.call('ZCARD', slot.holders)
    end
    if running >= limit then
      return false, running, limit
    end
  end
  return true, running, limit
end

local function take_slot(slot, beyond, known)
  local all = scopes(slot)
  local counts, first_limit, now = {}, nil, now_ms()
  for i, s in ipairs(all) do
    local ok, running, limit, copy = room(s, beyond, known, now)
    if not ok then return false, running, limit, copy, s end
    counts[i] = running
    first_limit = first_limit or limit
  end
  -- The first holder registers the scope for the sweep; the sweep forgets it only when it has no holder,
  -- parked job or waiter, so a tenant that waits behind holders is always visited.
  if #all > 1 then several_taken = true end
  for i, s in ipairs(all) do
    if counts[i] == 0 then register(s) end
    counts[i] = counts[i] + redis.call('ZADD', s.holders, now + s.lease, s.jid)
    unowned(s)
  end
  return true, counts[1], first_limit
end

-- A tenant whose next job cannot take its slot leaves `from` (ready or over) with its start tag: to `over`
-- under an elastic cap above 0, else to `capped`; it waits on the scope. `copy`: its job is a copy of a jid
-- holding the slot (take_slot): to `capped` whatever the cap (never served past the limit from `over`), until
-- a release, an expired lease or a raised limit wakes it; met still held then, it is held back again.
local function waiting_entry(k, queue, tier, member)
  return (tier == k.over and 'o' or 'c') .. #queue .. ':' .. queue .. member
end

-- `old`: the slot of the job the tenant waited for until now (default `slot`): a tenant of several scopes may
-- have waited on another of them, whose entry goes.
local function hold_back(k, queue, from, member, tag, slot, limit, running, copy, old)
  local to = (slot.elastic and limit > 0 and not copy) and k.over or k.capped
  if from ~= to then redis.call('ZREM', from, member) end
  if from ~= k.ready then
    local entry = waiting_entry(k, queue, from, member)
    for _, s in ipairs(scopes(old or slot)) do
      if from ~= to or not same_scope(s, slot) then wait_rem(s.waiting, entry) end
    end
  end
  redis.call('ZADD', to, tag, member)
  wait_add(slot.waiting, tag, waiting_entry(k, queue, to, member))
  -- Registered for the sweep whoever holds the scope: a limit of 0 (no holder registered it), or holders taken by
  -- a plain queue's runs (acquire.lua registers a scope only when it parks): a holder that dies never releases,
  -- and only the sweep would then see its lease end and wake this tenant. A registration already there stays.
  if running == 0 then
    register(slot)
  elseif redis.call('HSETNX', slot.meta, slot.sub, slot.default .. K_META_SEPARATOR .. slot.lease) == 1 then
    redis.call('SADD', K_SLOT_TAGS_KEY, slot.tag)
  end
end

-- Where a woken tenant goes: into `ready` with start tag max(theirs, v).
local function rejoin(k, from, member, tag)
  redis.call('ZREM', from, member)
  local v = vtime(k)
  if v > tag then tag = v end
  redis.call('ZADD', k.ready, tag, member)
end

-- Brings back tenants waiting on a scope, lowest start tag first, one per free slot (an elastic tenant
-- over its limit leaves `over` once its scope is under the limit). The first pop comes before the limit is
-- read: a scope nobody waits on costs one command. `tokens`: true wakes an idle fetcher per tenant brought
-- back; a table (the fetch script, which serves next) defers them: each is noted there as
-- {k, from, member, tag, known} and `serve` may take its turn at once (see settle). `max` (set_limit): at
-- most that many a call. Returns the count.
local function wake(slot, limit, tokens, max)
  local free, woken, running = nil, 0, nil
  while (free == nil or woken < free) and not (max and woken >= max) do
    local popped = redis.call('ZPOPMIN', slot.waiting)
    if popped[1] == nil then break end
    if free == nil then
      limit = limit or effective_limit(slot.limits, slot.sub, slot.default)
      running = redis.call('ZCARD', slot.holders)
      free = limit - running
    end
    if woken >= free then
      redis.call('ZADD', slot.waiting, popped[2], popped[1]) -- no room: it waits on
      break
    end
    local entry = popped[1]
    unindex(slot.waiting, entry)
    local qlen, at = entry:match('^[co](%d+):()')
    if qlen then
      local queue = entry:sub(at, at + tonumber(qlen) - 1)
      local member = entry:sub(at + tonumber(qlen))
      local k = fair_keys(fair_base(queue), K_FAIR_WEIGHTS_KEY)
      local from = entry:sub(1, 1) == 'o' and k.over or k.capped
      local tag = tonumber(redis.call('ZSCORE', from, member)) -- nil: it left meanwhile (cleared, drained)
      if tag then
        if type(tokens) == 'table' then
          -- known: the holders as read (those woken with it are not counted: the call serves one of them)
          tokens[#tokens + 1] = { k = k, from = from, member = member, tag = tag,
                                  known = { slot = slot, limit = limit, running = running } }
        else
          rejoin(k, from, member, tag)
          if tokens then add_tokens(k, 1, K_TOKEN_CAP) end
        end
        woken = woken + 1
      end
    end
  end
  return woken
end

-- A served job's slot back (acknowledged, requeued or recovered), and waiting tenants woken into it. The
-- job starts at `at` in `job` (default 1).
-- A job of several scopes gives back each it holds, each waking its own waiters.
local function release_slot(job, tokens, at)
  local slot = slot_of(job, at)
  if not slot then return end
  for _, s in ipairs(scopes(slot)) do
    if redis.call('ZREM', s.holders, s.jid) == 1 then
      if type(tokens) == 'table' then
        -- Tenants an earlier acknowledgement of this fetch woke read the scope's count before this release.
        for _, w in ipairs(tokens) do
          if same_scope(w.known.slot, s) then w.known.running = w.known.running - 1 end
        end
      end
      wake(s, nil, tokens)
    end
  end
end

-- Tenants woken by this fetch call's acknowledgements and not served by it (those of queue `only`, or all):
-- into `ready`, each with a wake-up token for an idle fetcher.
local function settle(woken, only)
  for i = #woken, 1, -1 do
    local w = woken[i]
    if only == nil or w.k.ready == only.ready then
      rejoin(w.k, w.from, w.member, w.tag)
      add_tokens(w.k, 1, K_TOKEN_CAP)
      table.remove(woken, i)
    end
  end
end

-- A job back to the *front* of its tenant's list (it runs next for that tenant). A tenant held back on its
-- former next job's scope rejoins the rotation: the job put in front may need no slot, or another one.
local function push_front(k, tenant, job, queue)
  redis.call('ZADD', k.heads, 'LT', job_time(job), tenant)
  if redis.call('LPUSH', k.prefix .. tenant, job) == 1 then
    activate(k, tenant, queue)
    return
  end
  local held_on = slot_of(redis.call('LINDEX', k.prefix .. tenant, 1))
  if not held_on then return end
  local entry
  for _, s in ipairs(scopes(held_on)) do
    entry = wait_lookup(s.waiting, queue, tenant)
    if entry then
      wait_rem(s.waiting, entry)
      break
    end
  end
  if not entry then return end
  local member = entry:sub(#tostring(#queue) + #queue + 3)
  local from = entry:sub(1, 1) == 'o' and k.over or k.capped
  local tag = tonumber(redis.call('ZSCORE', from, member))
  if tag then rejoin(k, from, member, tag) end -- else a stale entry, forgotten
end

-- A tenant that leaves the rotation for `paused` gives up a slot it may have been woken for: the next
-- tenant waiting on its next job's scope is woken instead. Met where it waited (over), it also drops its
-- waiting entry there (`entry`).
local function pass_on(k, list, entry)
  local slot = slot_of(redis.call('LINDEX', list, 0))
  if not slot then return end
  for _, s in ipairs(scopes(slot)) do
    if entry then wait_rem(s.waiting, entry) end
    wake(s, nil, true)
  end
end

-- A tenant of several scopes held back on `refused` (full): a slot of another scope it may have been woken for
-- goes to the next tenant waiting there (as pass_on does), so no scope is left with room and waiters. Each
-- scope at most once a call, and not for a copy of a job holding its slots (CappedSfq::pass_others says why).
local function pass_others(slot, refused)
  if #slot.more == 0 then return end
  for _, s in ipairs(scopes(slot)) do
    if not same_scope(s, refused) and not passed[s.holders] then
      passed[s.holders] = true
      wake(s, nil, true)
    end
  end
end

-- A tenant's weight as a serving call reads it: no lookup at all while nobody set a weight (whether anybody
-- did is read once a call, into `k`).
local function call_weight(k, tenant, queue)
  if k.weighted == nil then k.weighted = redis.call('EXISTS', k.weights) == 1 end
  return k.weighted and weight(k.weights, tenant, queue) or 1
end

-- A tenant that gives no job leaves `tier`: at weight 0 for `paused` (a slot it was woken for goes to the next
-- waiter), with an emptied list (cleared by hand) forgotten.
local function leave_without_job(k, queue, tier, member, tenant, paused, known)
  redis.call('ZREM', tier, member)
  redis.call('HDEL', k.members, tenant)
  if paused then
    redis.call('SADD', k.paused, tenant)
    redis.call('SADD', K_FAIR_PAUSED_QUEUES_KEY, queue)
    pass_on(k, k.prefix .. tenant, tier ~= k.ready and not known and waiting_entry(k, queue, tier, member))
  else
    redis.call('ZREM', k.heads, tenant)
  end
end

-- A job that does not start goes back to the head of its list (`k.put_back`: its bytes crossed Lua for nothing).
local function put_back(k, list, job)
  k.put_back = (k.put_back or 0) + #job
  redis.call('LPUSH', list, job)
end

-- A tenant served from where it waits (over, or capped when draining) still has its waiting entries there,
-- unless a wake took them (known): they go when it leaves that place. `slot`: the job's, read when known.
local function leave_waiting_entries(k, queue, tier, member, known, job, slot)
  local waits = tier ~= k.ready and not known and (slot or slot_of(job))
  if not waits then return end
  for _, s in ipairs(scopes(waits)) do wait_rem(s.waiting, waiting_entry(k, queue, tier, member)) end
end

-- Whether a rate window holds the job back: checked first, as it only reads (a window is spent only once the
-- slot is taken too). Held back, the job goes back and the tenant waits in `rated` until the window is due.
-- Returns whether it held the job back, else the checks to record when the job starts.
local function rate_holds_back(k, queue, tier, member, start, known, list, job, rate)
  local checks, due = rates_check(rate)
  if not due then return false, checks end
  put_back(k, list, job)
  leave_waiting_entries(k, queue, tier, member, known, job)
  hold_rated(k, tier, member, start, due)
  return true
end

-- Whether the job's scope holds it back: its slot not taken, the job goes back and the tenant waits on the
-- scope. Past the limit only from `over` while nobody is ready: not a tenant woken into a slot (known) that
-- its own job's lower limit does not give it. Returns whether it held the job back, else the scope's running
-- count and limit.
local function slot_holds_back(k, queue, tier, member, start, known, list, job, slot)
  local taken, running, limit, copy, refused = take_slot(slot, tier == k.over and not known, known)
  if taken then return false, running, limit end
  put_back(k, list, job)
  hold_back(k, queue, tier, member, start, refused, limit, running, copy, slot)
  if not copy then pass_others(slot, refused) end
  return true
end

-- The finish tags behind `start` forgotten, at most K_FIN_PRUNE a call (many tenants idle at one tag would be
-- one long call): a tag behind v is harmless (activate takes max(v, tag)), so pruning may lag.
local function prune_fin(k, start)
  local behind = redis.call('ZRANGEBYSCORE', k.fin, '-inf', start, 'LIMIT', 0, K_FIN_PRUNE)
  if #behind > 0 then
    redis.call('ZREM', k.fin, unpack(behind))
    if k.time then redis.call('HDEL', k.runtimes, unpack(behind)) end
  end
end

-- Where a served tenant's next job waits, at tag `finish`: in `ready`, or held back when its scope is now full
-- (this job took the last slot); with no next job the tenant leaves the rotation and keeps its finish tag in
-- `fin`. The next job is not read (its bytes would cross into Lua): whether there is one is its list's
-- length, and its scope is read only when this job took a slot. Its enqueue time is not either: `heads` keeps
-- the time the tenant had, which is no later than its next job's (readers read the head job where they need it).
local function place_next(k, queue, tier, member, tenant, known, job, slot, running, limit, start, finish)
  local list = k.prefix .. tenant
  if redis.call('LLEN', list) > 0 then
    local next_slot = slot and slot_of(redis.call('LINDEX', list, 0))
    if next_slot and same_scope(slot, next_slot) and running >= limit then
      hold_back(k, queue, tier, member, finish, next_slot, limit, running, false, slot)
    else
      if tier ~= k.ready then
        redis.call('ZREM', tier, member)
        leave_waiting_entries(k, queue, tier, member, known, job, slot)
      end
      redis.call('ZADD', k.ready, finish, member)
    end
  else
    leave_waiting_entries(k, queue, tier, member, known, job, slot)
    redis.call('ZREM', tier, member)
    redis.call('HDEL', k.members, tenant)
    redis.call('ZREM', k.heads, tenant)
    prune_fin(k, start)
    redis.call('ZADD', k.fin, finish, tenant)
  end
end

-- One turn of a tenant: its oldest job, if its rate window and its slot let it start; the virtual time moves
-- to `start` and the tenant's next job starts at start + 1 / weight (`k.time`: start + its charge in seconds /
-- weight, time.lua). Returns tenant, job, jid whose slot was taken, the charge (ms, under `k.time`), the
-- member; nil when the tenant gave no job.
local function turn(k, queue, tier, member, start, uncapped, known)
  local tenant = member_tenant(member)
  local w = call_weight(k, tenant, queue)
  local list = k.prefix .. tenant
  local job = w > 0 and redis.call('LPOP', list) or false
  if not job then
    leave_without_job(k, queue, tier, member, tenant, w == 0, known)
    return nil
  end
  local rate = not uncapped and rate_of(job) or nil
  local rate_checks
  if rate then
    local held
    held, rate_checks = rate_holds_back(k, queue, tier, member, start, known, list, job, rate)
    if held then return nil end
  end
  local slot = not uncapped and slot_of(job) or nil
  local running, limit = 0, 0
  if slot then
    local held
    held, running, limit = slot_holds_back(k, queue, tier, member, start, known, list, job, slot)
    if held then return nil end
  end
  if rate then rates_record(rate_checks) end
  moved_v[k.state] = start -- written once a call (count_taken)
  local charged = k.time and estimate(k, tenant)
  local finish = start + (charged and charged / 1000 or 1) / w
  place_next(k, queue, tier, member, tenant, known, job, slot, running, limit, start, finish)
  k.taken = (k.taken or 0) + 1 -- the backlog's count, written once a call (count_taken)
  return tenant, job, slot and slot.jid, charged, member
end

-- The jobs this call's turns took off the queue's backlog, off its count, and the virtual time they moved
-- it to (one write each a call). Every caller of `serve` calls it before it returns.
local function count_taken(k)
  if (k.taken or 0) > 0 then redis.call('HINCRBY', k.state, K_STATE_N, -k.taken) end
  k.taken = 0
  if moved_v[k.state] then redis.call('HSET', k.state, K_STATE_V, moved_v[k.state]) end
end

-- The tenant woken by this call's acknowledgements, if its turn comes before every ready tenant's: it is
-- served straight from where it waited (no move to `ready` and back). Others of this queue rejoin `ready`.
local function woken_turn(k, queue, woken)
  local v, best, best_start
  for i, w in ipairs(woken) do
    if w.k.ready == k.ready then
      v = v or vtime(k)
      local start = w.tag > v and w.tag or v
      if best == nil or start < best_start or (start == best_start and w.member < woken[best].member) then
        best, best_start = i, start
      end
    end
  end
  if not best then return nil end
  local w = table.remove(woken, best)
  local start = best_start
  local top = redis.call('ZRANGE', k.ready, 0, 0, 'WITHSCORES')
  if #top > 0 and (tonumber(top[2]) < start or (tonumber(top[2]) == start and top[1] < w.member)) then
    -- This call serves the tenant ahead of it; an idle fetcher is woken for this one (its slot is free).
    redis.call('ZREM', w.from, w.member)
    redis.call('ZADD', k.ready, start, w.member)
    add_tokens(k, 1, K_TOKEN_CAP)
    return nil
  end
  return turn(k, queue, w.from, w.member, start, false, w.known)
end

-- Takes the next job in fair order: the ready tenant with the smallest start tag gives its oldest job
-- (turn). While no ready tenant is left, tenants over an elastic cap are served the same way
-- (work-conserving). A tenant whose job cannot take its slot leaves the rotation (hold_back) and the next is
-- tried (at most 100, and at most K_CALL_BYTES of their head jobs, a call); paused tenants met at the head
-- leave it too (bounded per call; each moves once). `uncapped`: ignore
-- caps, capped tenants included (draining). `woken`: tenants this call's acknowledgements woke (wake).
-- Returns tenant, job, the jid whose slot was taken (or nil); nil when none.
local function serve(k, queue, uncapped, woken)
  if not k.rate_woken then -- once a call: a tenant held by this call is due later than now
    k.rate_woken = true
    rate_wake(k, uncapped)
  end
  if woken and #woken > 0 then
    local tenant, job, jid, charged, member = woken_turn(k, queue, woken)
    if tenant then return tenant, job, jid, charged, member end
    settle(woken, k) -- the others of this queue rejoin before the rotation is looked at
  end
  for _ = 1, 100 do
    local tier = k.ready
    local top = redis.call('ZRANGE', k.ready, 0, 0, 'WITHSCORES')
    if #top == 0 then
      -- Nothing to serve. Tokens left over (pushes for paused tenants, jobs taken by busy threads) each
      -- wake one idle fetcher once for nothing; they are not deleted here, which would cost every idle
      -- fetch a command.
      tier = k.over
      top = redis.call('ZRANGE', k.over, 0, 0, 'WITHSCORES')
      if #top == 0 and uncapped then
        tier = k.capped
        top = redis.call('ZRANGE', k.capped, 0, 0, 'WITHSCORES')
      end
      if #top == 0 then return nil end
    end
    local start = tonumber(top[2])
    if tier ~= k.ready then
      -- Tags in over (or capped) stayed behind while ready tenants moved v on: v never goes backwards.
      local v = vtime(k)
      if v > start then start = v end
    end
    local tenant, job, jid, charged, member = turn(k, queue, tier, top[1], start, uncapped)
    if tenant then return tenant, job, jid, charged, member end
    if (k.put_back or 0) >= K_CALL_BYTES then
      -- K_CALL_BYTES of head jobs popped and put back (their tenants held back; `k` is this call's): the rest
      -- of the rotation is looked at by the next call, an idle fetcher woken for it.
      add_tokens(k, 1, K_TOKEN_CAP)
      return nil
    end
  end
  return nil
end

-- The first member of `zset` matching the glob `pattern` that `accept` takes, with its score (ZSCAN MATCH,
-- so the whole set is walked in Redis, not in Lua).
local function find_member(zset, pattern, accept)
  local at = '0'
  repeat
    local step = redis.call('ZSCAN', zset, at, 'MATCH', pattern, 'COUNT', 1000)
    at = step[1]
    for i = 1, #step[2], 2 do
      if accept(step[2][i]) then return step[2][i], tonumber(step[2][i + 1]) end
    end
  until at == '0'
  return nil
end

local function glob_escape(s)
  return (s:gsub('[%*%?%[%]\\]', '\\%0'))
end

local ACTIVATION = ('?'):rep(K_ACTIVATION_DIGITS) -- no `string` global while a function library loads

-- The places a backlogged tenant that is not paused may be: {suffix, key}, in the order they are looked in.
local function tiers_of(k)
  return { { K_READY, k.ready }, { K_CAPPED, k.capped }, { K_OVER, k.over }, { K_RATED, k.rated } }
end

-- Where `tenant` is in the rotation, read from the members index (each tier checked with one ZSCORE): its
-- member, the key of the tier holding it, its score there and the tier's suffix, or nil.
local function indexed_member(k, tenant)
  local member = redis.call('HGET', k.members, tenant)
  if not member then return nil end
  for _, tier in ipairs(tiers_of(k)) do
    local score = redis.call('ZSCORE', tier[2], member)
    if score then return member, tier[2], tonumber(score), tier[1] end
  end
  return nil
end

-- As indexed_member; a state that lacks the index (written by hand, or by a gem before it) is walked instead.
local function member_of(k, tenant)
  local member, key, score, place = indexed_member(k, tenant)
  if member then return member, key, score, place end
  local pattern = ACTIVATION .. glob_escape(tenant)
  for _, tier in ipairs(tiers_of(k)) do
    local found, at = find_member(tier[2], pattern, function(m) return member_tenant(m) == tenant end)
    if found then return found, tier[2], at, tier[1] end
  end
  return nil
end

-- Where a held-back tenant of `queue` waits on one of `slot`'s scopes: its waiting entry goes; returns the tier
-- (capped or over), its member there and start tag, or nil (not held on this scope).
local function unwait(k, queue, slot, tenant)
  local prefix = #queue .. ':' .. queue
  local entry
  for _, s in ipairs(scopes(slot)) do
    entry = wait_lookup(s.waiting, queue, tenant)
    if entry then
      wait_rem(s.waiting, entry)
      break
    end
  end
  if not entry then return nil end
  local member = entry:sub(#prefix + 2)
  local tier = entry:sub(1, 1) == 'o' and k.over or k.capped
  local tag = tonumber(redis.call('ZSCORE', tier, member))
  if not tag then return nil end
  return tier, member, tag
end

-- The scope of `slot` that holds the tenant's next job: the one it waits on, else the first with no room
-- (read as stats and why show it), else the first.
local function holding_scope(k, queue, slot, tenant)
  if not slot or #slot.more == 0 then return slot end
  local now = now_ms()
  for _, s in ipairs(scopes(slot)) do
    if wait_lookup(s.waiting, queue, tenant) then return s end
  end
  for _, s in ipairs(scopes(slot)) do
    if redis.call('ZCOUNT', s.holders, now, '+inf') >= effective_limit(s.limits, s.sub, s.default) then return s end
  end
  return slot
end

-- A tenant whose list a removal emptied (`last`: that job) leaves every place it was in, its start tag kept
-- in fin while ahead of v.
local function leave(k, queue, tenant, last)
  redis.call('ZREM', k.heads, tenant)
  if redis.call('SREM', k.paused, tenant) == 1 then return end
  local slot = slot_of(last)
  local tier, member, tag
  if slot then tier, member, tag = unwait(k, queue, slot, tenant) end
  if not member then member, tier, tag = member_of(k, tenant) end
  if not member then return end
  redis.call('ZREM', tier, member)
  redis.call('HDEL', k.members, tenant)
  if tier == k.rated then
    tag = finite(redis.call('HGET', k.rtags, member)) or 0
    redis.call('HDEL', k.rtags, member)
  end
  if tag > vtime(k) then redis.call('ZADD', k.fin, tag, tenant) end
end

-- Takes one waiting job (the exact payload) out of `tenant`'s list of a fair queue, the scheduling state
-- following as when a job is served: `n` drops by one; a tenant whose list empties leaves the rotation; a
-- tenant whose oldest job went has its next job's time in heads and, if it was held back on that job's
-- scope, rejoins the rotation with a wake-up token. Returns true when the job was there.
-- `depth` (nil: the whole list) bounds how far from the front the job is looked for.
local function take_waiting(k, queue, tenant, job, depth)
  local list = k.prefix .. tenant
  local head = redis.call('LINDEX', list, 0)
  if not head then return false end
  if depth and not redis.call('LPOS', list, job, 'MAXLEN', depth) then return false end
  if redis.call('LREM', list, 1, job) == 0 then return false end
  redis.call('HINCRBY', k.state, K_STATE_N, -1)
  local next_job = redis.call('LINDEX', list, 0)
  if not next_job then
    leave(k, queue, tenant, job)
  elseif head == job then
    redis.call('ZADD', k.heads, job_time(next_job), tenant)
    local slot = slot_of(job)
    local tier, member, tag
    if slot then tier, member, tag = unwait(k, queue, slot, tenant) end
    if member then
      rejoin(k, tier, member, tag)
      add_tokens(k, 1, K_TOKEN_CAP)
    end
  end
  return true
end

-- A process missing from the registry (new, or its in-flight jobs were recovered while it stalled)
-- registers again before it fetches or acknowledges anything. The copies of its recovered jobs still
-- waiting go back into its in-flight hash under their fields (it is still running those jobs, or finished them
-- and its acknowledgement follows), so it does not fetch them again, and nobody runs them after it
-- finished them. A job with a concurrency slot holds it again (it runs). A copy already taken by another
-- process runs there too (at least once). A copy is looked for among the first K_TAKE_BACK_DEPTH jobs of its
-- tenant (recovery put it at the front; only as many jobs recovered or requeued to that tenant since go ahead
-- of it), so a copy already served costs a bounded look, not a pass over the tenant's whole backlog.
-- The copies come in the hash's order, which a server seeds at random: nothing may depend on it. A scope the
-- copies find without holders is registered once, after they are all back, with the highest limit they carry
-- there (ties: the longest lease), not with whichever came first (what a deleted runtime limit wakes by).
local function ensure_registered(identity, inflight, registry, recovered, weights)
  if redis.call('SISMEMBER', registry, identity) == 1 then return end
  redis.call('SADD', registry, identity)
  redis.call('SREM', K_INFLIGHT_RECOVERING_KEY, identity) -- a recovery cut short leaves it the rest
  local copies = redis.call('HGETALL', recovered)
  if #copies == 0 then return end
  local fresh = {} -- per scope met (holders key): the slot to register it with, or false (it had holders)
  for i = 1, #copies, 2 do
    local queue, tenant = entry_head(copies[i]) -- field -> the job as it was put back
    local job = copies[i + 1]
    if queue and take_waiting(fair_keys(fair_base(queue), weights), queue, tenant, job, K_TAKE_BACK_DEPTH) then
      redis.call('HSET', inflight, copies[i], job) -- under its field: its acknowledgement finds it
      local slot = slot_of(job)
      for _, s in ipairs(slot and scopes(slot) or {}) do
        local best = fresh[s.holders]
        if best == nil then
          fresh[s.holders] = redis.call('ZCARD', s.holders) == 0 and s
        elseif best and (s.default > best.default or (s.default == best.default and s.lease > best.lease)) then
          fresh[s.holders] = s
        end
        redis.call('ZADD', s.holders, now_ms() + s.lease, s.jid)
        unowned(s)
      end
    end
  end
  for _, slot in pairs(fresh) do
    if slot then register(slot) end
  end
  redis.call('DEL', recovered)
end

-- Under `time`: a job's measured run time (`timing`: "<charged ms> <ran ms> <len>:<queue><member>", the
-- member its tenant had when served) corrects its charge. The means learn it; the tenant's tag moves by
-- (ran - charged) / 1000 / weight where it is (ready, over or capped, with its waiting entry; rated; or fin
-- when idle), never below v by a refund (no banked credit). A tenant met nowhere under that member (paused, back
-- from idle under a new activation, its fin tag pruned) keeps its tag.
local function charge_back(weights, timing)
  local charged, ran, queue, member = parse_timing(timing)
  if not queue then return end
  local tenant = member_tenant(member)
  local k = fair_keys(fair_base(queue), weights)
  -- Times that are not finite numbers from 0 up (a timing the gem did not write) teach and move nothing.
  ran, charged = finite(ran, 0), finite(charged, 0)
  if not ran then return end
  ran = bounded_ms(ran)
  learn(k.runtimes, tenant, ran)
  learn(k.state, K_STATE_MEAN, ran)
  local w = weight(weights, tenant, queue)
  if w == 0 or not charged or ran == charged then return end
  local delta = (ran - charged) / 1000 / w
  local v = vtime(k)
  local function moved(tag)
    local new = tag + delta
    if delta < 0 and new < v then new = v < tag and v or tag end
    return finite(new) or tag -- inf - inf (a weight near 0): the tag stays
  end
  for _, tier in ipairs({ k.ready, k.over, k.capped }) do
    local tag = tonumber(redis.call('ZSCORE', tier, member))
    if tag then
      local new = moved(tag)
      redis.call('ZADD', tier, new, member)
      if tier ~= k.ready then
        local slot = slot_of(redis.call('LINDEX', k.prefix .. tenant, 0))
        for _, s in ipairs(slot and scopes(slot) or {}) do
          redis.call('ZADD', s.waiting, 'XX', new, waiting_entry(k, queue, tier, member))
        end
      end
      return
    end
  end
  local kept = finite(redis.call('HGET', k.rtags, member)) -- waiting for a rate window
  if kept then
    redis.call('HSET', k.rtags, member, moved(kept))
    return
  end
  local tag = tonumber(redis.call('ZSCORE', k.fin, tenant))
  if tag then redis.call('ZADD', k.fin, moved(tag), tenant) end
end
