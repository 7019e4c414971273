-- A page of a fair queue's waiting jobs, for Sidekiq's API (Queue#each) and its Web queue page: tenants in
-- the order of `heads` (by enqueue time, then by name: each tenant's oldest waiting job's when written, or a
-- job's it had before, serving does not read the next job), each tenant's jobs oldest first. A walk goes on from the cursor the previous call returned; a call looks at no more than `steps`
-- tenants and returns no more than `max` jobs, and no more than K_CALL_BYTES of them past the first (a page
-- cut short by bytes returns its cursor: the caller goes on from it).
-- KEYS  (none)
-- ARGV  base, max, steps, skip (jobs to pass over first), then the cursor: score, tenant, offset, length
--       (score "": from the first tenant). The cursor's tenant is read on from its job `offset`, less what
--       its list lost since it was `length` long (served or deleted jobs go from its front), then the
--       tenants after (score, tenant) in heads (the cursor's tenant not again, should it be further on now).
-- Returns {score, tenant, offset, length, skip left, tenant, job, tenant, job, ...}: the cursor to go on from
-- (score false: the walk is over), then the jobs, each after its tenant.
local k = fair_keys(ARGV[1], '')
local max, steps, skip = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local reply = { false, '', 0, 0, 0 }
local jobs, bytes, largest = 0, 0, 0

-- Reads tenant `t`'s jobs from index `from` (after passing over what is left to skip). Returns the index
-- reached, the list's length and whether the list is read to its end.
local function read(t, from)
  local list = k.prefix .. t
  local len = redis.call('LLEN', list)
  if skip > 0 and from < len then
    local passed = math.min(skip, len - from)
    skip = skip - passed
    from = from + passed
  end
  while from < len do
    local n = byte_page(bytes, largest, max - jobs)
    if n <= 0 then break end
    local got = redis.call('LRANGE', list, from, from + n - 1)
    if #got == 0 then break end
    for _, job in ipairs(got) do
      reply[#reply + 1] = t
      reply[#reply + 1] = job
      bytes = bytes + #job
      if #job > largest then largest = #job end
    end
    jobs = jobs + #got
    from = from + #got
  end
  return from, len, from >= len
end

local function cursor(score, t, at, len)
  reply[1], reply[2], reply[3], reply[4], reply[5] = score, t, at, len, skip
  return reply
end

-- Byte order, as Redis orders members of equal score (Lua's `<` follows the server's locale).
local function byte_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

-- The rank in heads of the first tenant after (score, t); t may have moved or left since.
local function after(score, t)
  local now = redis.call('ZSCORE', k.heads, t)
  if now and tonumber(now) == tonumber(score) then return redis.call('ZRANK', k.heads, t) + 1 end
  local lo = redis.call('ZCOUNT', k.heads, '-inf', '(' .. score)
  local hi = lo + redis.call('ZCOUNT', k.heads, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if byte_le(redis.call('ZRANGE', k.heads, mid, mid)[1], t) then lo = mid + 1 else hi = mid end
  end
  return lo
end

local rank, previous = 0, nil
if ARGV[5] ~= '' then
  local score, t = ARGV[5], ARGV[6]
  previous = t -- read to its end: not again should it have moved further on (served meanwhile)
  local offset = tonumber(ARGV[7]) - math.max(tonumber(ARGV[8]) - redis.call('LLEN', k.prefix .. t), 0)
  local at, len, done = read(t, math.max(offset, 0))
  if not done then return cursor(score, t, at, len) end
  rank = after(score, t)
end

local visited = 0
while visited < steps do
  local batch = redis.call('ZRANGE', k.heads, rank, rank + math.min(steps - visited, 100) - 1, 'WITHSCORES')
  if #batch == 0 then return cursor(false, '', 0, 0) end
  for i = 1, #batch, 2 do
    local t, score = batch[i], batch[i + 1]
    if t ~= previous then
      visited = visited + 1
      local at, len, done = read(t, 0)
      if not done or visited >= steps then return cursor(score, t, at, len) end
    end
  end
  rank = rank + #batch / 2
end
return cursor(false, '', 0, 0)
