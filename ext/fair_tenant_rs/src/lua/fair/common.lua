-- Start-time fair queueing over the backlogged tenants of one fair queue (the policy; the Rust module
-- fair/sfq.rs holds the same rule as a model with its unit tests; fair/lockstep.rs runs both side by side).
--
-- Keys of a fair queue Q (one hash tag, so one slot):
--   ready  ZSET   backlogged tenants that may be served; member = 16 hex digits of activation order ..
--                 tenant (ties go to the earlier activation, never to a name), score = start tag of
--                 the tenant's head job
--   state  HASH   v (virtual time: the start tag of the job served last; written once a call), n (jobs
--                 waiting), seq
--   fin    ZSET   tenants that went idle, scored by their finish tag; pruned once v passes it
--   paused SET    backlogged tenants of weight 0
--   sig    LIST   wake-up tokens for idle fetchers (at most `cap`)
--   heads  ZSET   tenant -> enqueue time (s) of its oldest waiting job when it was written (activation, a
--                 job put back in front, a delete), or of a job it had before: serving does not read the
--                 next job, so the time is never later than the oldest's; readers read the head job where
--                 they need the exact time (head_time: latency, stats)
--   capped ZSET   tenants out of the rotation: their next job's concurrency scope is full (a static cap);
--                 member and score as in ready (fair/serve.lua)
--   over   ZSET   tenants at or over an elastic cap: served, in fair order, only while ready is empty
--   rated  ZSET   tenants out of the rotation until a rate window lets their next job start (score: that
--                 instant, ms of Redis's clock); member as in ready, start tag kept in rated-tags (HASH)
--   members HASH  tenant -> its member in ready, capped, over or rated (set at activation, removed when the
--                 tenant leaves them): delete, why and a process back from a stall find a tenant's place
--                 without walking the tiers (a ZSCAN of every member)
--   runtimes HASH  under `time`: tenant -> its recent mean run time (time.lua)
--   prefix .. tenant  LIST  the tenant's jobs, oldest first
--   pushed: .. id  STRING  a bulk push's call that ran (push.lua): the same call sent again pushes nothing
-- weights HASH (shared): tenant -> weight, tenant .. K_WEIGHT_SEPARATOR .. queue -> weight; default 1, 0 pauses.
-- The names are spelled once, in names.rs; scripts name them K_<NAME>, replaced by their values when built.

-- The virtual time of each fair queue this call moved, by its state key: a serving call moves it with every job
-- it serves but writes it once (count_taken, serve.lua), and every reader in the call reads it here first
-- (vtime). Emptied when a call begins: fair/scripts.rs puts begin_call() first in every script.
local moved_v = {}
-- Whether a job of several concurrency scopes took its slots in this call (serve.lua's take_slot): holder counts
-- a wake read earlier in the call may be behind since, so no turn takes them as read.
local several_taken = false
-- The scopes a tenant held back in this call passed on (serve.lua's pass_others): each at most once a call.
local passed = {}
local function begin_call()
  moved_v = {}
  several_taken = false
  passed = {}
end

-- A queue's virtual time: the start tag of the job served last.
local function vtime(k)
  return moved_v[k.state] or finite(redis.call('HGET', k.state, K_STATE_V)) or 0
end

-- A weight that is not a finite number (NaN, inf, text: written by hand) is passed over; below 0 pauses.
local function weight(weights, tenant, queue)
  local w = redis.call('HMGET', weights, tenant .. K_WEIGHT_SEPARATOR .. queue, tenant)
  local value = finite(w[1]) or finite(w[2]) or 1
  if value < 0 then value = 0 end
  return value
end

-- A tenant whose list just got its first job: its start tag is max(v, its finish tag), so a
-- tenant back from idle cannot bank credit, and a tenant served just before cannot jump ahead.
local function activate(k, tenant, queue)
  local w = weight(k.weights, tenant, queue)
  if w == 0 then
    redis.call('SADD', k.paused, tenant)
    redis.call('SADD', K_FAIR_PAUSED_QUEUES_KEY, queue)
    return
  end
  local v = vtime(k)
  local f = tonumber(redis.call('ZSCORE', k.fin, tenant))
  if f then
    redis.call('ZREM', k.fin, tenant)
    if f > v then v = f end
  end
  local seq = redis.call('HINCRBY', k.state, K_STATE_SEQ, 1)
  local member = string.format('%0' .. K_ACTIVATION_DIGITS .. 'x', seq) .. tenant
  redis.call('ZADD', k.ready, v, member)
  redis.call('HSET', k.members, tenant, member)
end

-- When a job was enqueued, in seconds (Sidekiq 8 writes milliseconds); Redis's time now when unreadable or
-- out of range (absent, not a number, NaN, +-inf, below 0, past the year 5000): the caller ZADDs it after a
-- write, so it is always a finite number. A job FairPush wrote starts with its enqueue time
-- (`{"enqueued_at":<t>,"jid":...`): read there, whatever the job's size. Others (pushed by an earlier
-- version, adopted from `queue:<name>`) are decoded.
local function job_time(job)
  local t = tonumber(string.match(job, '^{"enqueued_at":([%d%.eE+-]+)[,}]'))
  if not t then
    local ok, decoded = pcall(cjson.decode, job)
    t = ok and type(decoded) == 'table' and tonumber(decoded.enqueued_at)
  end
  t = finite(t, 0)
  if t and t > 1e11 then t = t / 1000 end
  t = finite(t, 0, 1e11)
  if t then return t end
  local now = redis.call('TIME')
  return tonumber(now[1]) + tonumber(now[2]) / 1e6
end

-- The exact enqueue time of a tenant's oldest waiting job (its head job read: `heads` may hold an older one),
-- or `known` when its list is empty.
local function head_time(k, tenant, known)
  local head = redis.call('LINDEX', k.prefix .. tenant, 0)
  return head and job_time(head) or known
end

-- One job to the back of its tenant's list (enqueued at `time`, nil: read from the job); the tenant
-- activated if the list was empty.
local function push_job(k, tenant, job, queue, time)
  if redis.call('RPUSH', k.prefix .. tenant, job) == 1 then
    redis.call('ZADD', k.heads, time or job_time(job), tenant)
    activate(k, tenant, queue)
  end
end

-- How many jobs a call bounded by K_CALL_BYTES reads next from a list, having read `bytes` (its largest job
-- `largest`, 0: none yet): 1 first, then as many of the largest as fit in what is left (1 to K_RECOVER_PAGE),
-- at most `left`; 0 once the call has read K_CALL_BYTES.
local function byte_page(bytes, largest, left)
  if largest == 0 then return math.min(1, left) end
  if bytes >= K_CALL_BYTES then return 0 end
  return math.min(left, K_RECOVER_PAGE, math.max(1, math.floor((K_CALL_BYTES - bytes) / largest)))
end

-- Wake-up tokens for idle fetchers: one per job, at most `cap` waiting.
local function add_tokens(k, count, cap)
  local tokens = math.min(count, cap - redis.call('LLEN', k.sig))
  for _ = 1, tokens do
    redis.call('LPUSH', k.sig, '1')
  end
end

-- A queue's keys, each made when first read (a push reads 4 of the 14: a string made in Lua costs time). The one way
-- a script reaches a queue's keys: fair_keys(base), with the base its caller sent or fair_base(queue).
local FAIR_KEY_SUFFIXES = {
  ready = K_READY, state = K_STATE, fin = K_FIN, paused = K_PAUSED, sig = K_SIG, heads = K_HEADS,
  capped = K_CAPPED, over = K_OVER, rated = K_RATED, rtags = K_RATED_TAGS, prefix = K_TENANT_LIST,
  runtimes = K_RUNTIMES, members = K_MEMBERS, push_call = K_PUSH_CALL
}
local FAIR_KEYS = {
  __index = function(k, name)
    local suffix = FAIR_KEY_SUFFIXES[name]
    if not suffix then return nil end
    local key = rawget(k, 'base') .. suffix
    rawset(k, name, key)
    return key
  end
}

local function fair_keys(base, weights)
  return setmetatable({ base = base, weights = weights }, FAIR_KEYS)
end

-- A queue's key prefix (names.rs FAIR_BASE, Rust's fair::base): K_FAIR_BASE with the queue for its
-- K_QUEUE_PLACEHOLDER.
local function fair_base(queue)
  local at = string.find(K_FAIR_BASE, K_QUEUE_PLACEHOLDER, 1, true)
  return string.sub(K_FAIR_BASE, 1, at - 1) .. queue .. string.sub(K_FAIR_BASE, at + #K_QUEUE_PLACEHOLDER)
end

-- The tenant of a member of ready, capped or over (after the hex digits of its activation).
local function member_tenant(member)
  return member:sub(K_ACTIVATION_DIGITS + 1)
end

-- "<len>:<queue><len>:<tenant><rest>": where an in-flight job goes back to. `rest`: the field's id and slot
-- mark (names.rs INFLIGHT_PREFIX); the job itself in a format-2 list's entry.
local function inflight_entry(queue, tenant, job)
  return #queue .. ':' .. queue .. #tenant .. ':' .. tenant .. job
end

-- A fair job's extras in the fetch reply: "F<len>:<jid whose slot it took><len>:<charge, ms><member>" (each may
-- be empty); keys.rs served_extras reads them back.
local function served_extras(held, ms, member)
  return 'F' .. #held .. ':' .. held .. #ms .. ':' .. ms .. member
end

-- An acknowledgement's timing under `time` (keys.rs timing builds it): "<charged ms> <ran ms> <len>:<queue><member>",
-- read back to charged, ran, queue, member (all strings); nil for a timing in no such form.
local function parse_timing(timing)
  local charged, ran, qlen, at = timing:match('^(%S+) (%S+) (%d+):()')
  if not qlen then return nil end
  return charged, ran, timing:sub(at, at + tonumber(qlen) - 1), timing:sub(at + tonumber(qlen))
end

-- An in-flight entry's queue, tenant and where its job starts (no copy of the job: a long string made in
-- Lua costs time in proportion to its length).
local function entry_head(entry)
  local qlen, rest = entry:match('^(%d+):()')
  qlen = finite(qlen, 0, #entry)
  if not qlen then return nil end
  local queue = entry:sub(rest, rest + qlen - 1)
  local tail = rest + qlen
  local tlen, rest2 = entry:match('^(%d+):()', tail)
  tlen = finite(tlen, 0, #entry)
  if not tlen then return nil end
  return queue, entry:sub(rest2, rest2 + tlen - 1), rest2 + tlen
end

-- Whether an in-flight field says its job took a concurrency slot.
local function inflight_slotted(field)
  local _, _, at = entry_head(field)
  return at ~= nil and string.find(field, '^%d+' .. K_INFLIGHT_SLOT_MARK .. '$', at) ~= nil
end

local function parse_entry(entry)
  local queue, tenant, at = entry_head(entry)
  if not queue then return nil end
  return queue, tenant, entry:sub(at)
end
