-- Start-time fair queueing over the backlogged tenants of one fair queue (the policy; the Rust module
-- fair.rs holds the same rule as a model with its unit tests, keep the two alike).
--
-- Keys of a fair queue Q (one hash tag, so one slot):
--   ready  ZSET   backlogged tenants that may be served; member = 16 hex digits of activation order ..
--                 tenant (ties go to the earlier activation, never to a name), score = start tag of
--                 the tenant's head job
--   state  HASH   v (virtual time: the start tag of the job served last), n (jobs waiting), seq
--   fin    ZSET   tenants that went idle, scored by their finish tag; pruned once v passes it
--   paused SET    backlogged tenants of weight 0
--   sig    LIST   wake-up tokens for idle fetchers (at most `cap`)
--   heads  ZSET   tenant -> enqueue time (s) of its oldest waiting job: the queue's latency
--   prefix .. tenant  LIST  the tenant's jobs, oldest first
-- weights HASH (shared): tenant -> weight, tenant .. "\n" .. queue -> weight; default 1, 0 pauses.

local function weight(weights, tenant, queue)
  local w = redis.call('HMGET', weights, tenant .. '\n' .. queue, tenant)
  local value = tonumber(w[1]) or tonumber(w[2]) or 1
  if value < 0 then value = 0 end
  return value
end

-- A tenant whose list just got its first job: its start tag is max(v, its finish tag), so a
-- tenant back from idle cannot bank credit, and a tenant served just before cannot jump ahead.
local function activate(k, tenant, queue)
  local w = weight(k.weights, tenant, queue)
  if w == 0 then
    redis.call('SADD', k.paused, tenant)
    return
  end
  local v = tonumber(redis.call('HGET', k.state, 'v')) or 0
  local f = tonumber(redis.call('ZSCORE', k.fin, tenant))
  if f then
    redis.call('ZREM', k.fin, tenant)
    if f > v then v = f end
  end
  local seq = redis.call('HINCRBY', k.state, 'seq', 1)
  redis.call('ZADD', k.ready, v, string.format('%016x', seq) .. tenant)
end

-- When a job was enqueued, in seconds (Sidekiq 8 writes milliseconds); now when unreadable.
local function job_time(job)
  local ok, decoded = pcall(cjson.decode, job)
  local t = ok and type(decoded) == 'table' and tonumber(decoded.enqueued_at)
  if not t then
    local now = redis.call('TIME')
    return tonumber(now[1]) + tonumber(now[2]) / 1e6
  end
  if t > 1e11 then t = t / 1000 end
  return t
end

-- One job to the back of its tenant's list (enqueued at `time`, nil: read from the job); the tenant
-- activated if the list was empty.
local function push_job(k, tenant, job, queue, time)
  if redis.call('RPUSH', k.prefix .. tenant, job) == 1 then
    redis.call('ZADD', k.heads, time or job_time(job), tenant)
    activate(k, tenant, queue)
  end
end

-- A job back to the *front* of its tenant's list (it runs next for that tenant).
local function push_front(k, tenant, job, queue)
  redis.call('ZADD', k.heads, 'LT', job_time(job), tenant)
  if redis.call('LPUSH', k.prefix .. tenant, job) == 1 then
    activate(k, tenant, queue)
  end
end

-- Wake-up tokens for idle fetchers: one per job, at most `cap` waiting.
local function add_tokens(k, count, cap)
  local tokens = math.min(count, cap - redis.call('LLEN', k.sig))
  for _ = 1, tokens do
    redis.call('LPUSH', k.sig, '1')
  end
end

local function fair_keys(base, weights)
  return { ready = base .. 'ready', state = base .. 'state', fin = base .. 'fin', paused = base .. 'paused',
           sig = base .. 'sig', heads = base .. 'heads', prefix = base .. 't:', weights = weights }
end

-- Takes the next job in fair order: the ready tenant with the smallest start tag gives its oldest job, the
-- virtual time moves to that tag, the tenant's next job starts at tag + 1 / weight. Paused tenants met at
-- the head leave the rotation (bounded per call; each moves once). Returns tenant, job; nil when none.
local function serve(k, queue)
  for _ = 1, 100 do
    local top = redis.call('ZRANGE', k.ready, 0, 0, 'WITHSCORES')
    if #top == 0 then
      -- Nothing to serve. Tokens left over (pushes for paused tenants, jobs taken by busy threads) each
      -- wake one idle fetcher once for nothing; they are not deleted here, which would cost every idle
      -- fetch a command.
      return nil
    end
    local member, start = top[1], tonumber(top[2])
    local tenant = member:sub(17)
    local w = weight(k.weights, tenant, queue)
    local list = k.prefix .. tenant
    local job = w > 0 and redis.call('LPOP', list) or false
    if w == 0 then
      redis.call('ZREM', k.ready, member)
      redis.call('SADD', k.paused, tenant)
    elseif not job then
      redis.call('ZREM', k.ready, member) -- an emptied list (cleared by hand): forget it
      redis.call('ZREM', k.heads, tenant)
    else
      redis.call('HSET', k.state, 'v', top[2])
      local finish = start + 1 / w
      local next_job = redis.call('LINDEX', list, 0)
      if next_job then
        redis.call('ZADD', k.ready, finish, member)
        redis.call('ZADD', k.heads, job_time(next_job), tenant)
      else
        redis.call('ZREM', k.ready, member)
        redis.call('ZREM', k.heads, tenant)
        redis.call('ZADD', k.fin, finish, tenant)
      end
      redis.call('ZREMRANGEBYSCORE', k.fin, '-inf', start)
      redis.call('HINCRBY', k.state, 'n', -1)
      return tenant, job
    end
  end
  return nil
end

-- "<len>:<queue><len>:<tenant><job>": how an in-flight job remembers where it goes back to.
local function inflight_entry(queue, tenant, job)
  return #queue .. ':' .. queue .. #tenant .. ':' .. tenant .. job
end

local function parse_entry(entry)
  local qlen, rest = entry:match('^(%d+):()')
  if not qlen then return nil end
  qlen = tonumber(qlen)
  local queue = entry:sub(rest, rest + qlen - 1)
  local tail = rest + qlen
  local tlen, rest2 = entry:match('^(%d+):()', tail)
  if not tlen then return nil end
  tlen = tonumber(tlen)
  local tenant = entry:sub(rest2, rest2 + tlen - 1)
  return queue, tenant, entry:sub(rest2 + tlen)
end
