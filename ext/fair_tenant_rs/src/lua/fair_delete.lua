-- Deletes one waiting job of a fair queue (Sidekiq::JobRecord#delete, the Web queue page's Delete): the exact
-- payload, looked for in `tenant`'s list, then, when a scan cursor is given, in the lists of the tenants one
-- ZSCAN step of `heads` returns from it (`count` hint). The scheduling state follows as when a job is
-- served: `n` drops by one; a tenant whose list empties leaves heads and ready / over / capped / paused (and
-- its waiting entry on the job's scope), its start tag kept in fin while ahead of v, so coming back it
-- starts where its next job would have; a tenant whose oldest job went has its next job's time in heads
-- and, if it was held back on the deleted job's scope, rejoins the rotation with a wake-up token (its next
-- job may need no slot, or another one).
-- KEYS  (none)
-- ARGV  base, queue, job, tenant, cursor ("": only `tenant`'s list), count
-- Returns {1, tenant} when deleted, else {0, next cursor} ("0": the scan is over, or none was asked).
local k = fair_keys(ARGV[1], '')
local queue, job = ARGV[2], ARGV[3]

local function glob_escape(s)
  return (s:gsub('[%*%?%[%]\\]', '\\%0'))
end

-- The first member of `zset` matching `pattern` that `accept` takes, with its score; ZSCAN MATCH, so the
-- whole set is walked in Redis, not in Lua.
local function find(zset, pattern, accept)
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

local HEX16 = string.rep('?', 16)

-- Where a held-back tenant waits on `slot`'s scope: its waiting entry goes; returns the tier (capped or
-- over), its member there and start tag, or nil (not held on this scope).
local function unwait(slot, tenant)
  local prefix = #queue .. ':' .. queue
  local entry = find(slot.waiting, '[co]' .. glob_escape(prefix) .. HEX16 .. glob_escape(tenant), function(e)
    return e:sub(2, #prefix + 1) == prefix and e:sub(#prefix + 18) == tenant
  end)
  if not entry then return nil end
  redis.call('ZREM', slot.waiting, entry)
  local member = entry:sub(#prefix + 2)
  local tier = entry:sub(1, 1) == 'o' and k.over or k.capped
  local tag = tonumber(redis.call('ZSCORE', tier, member))
  if not tag then return nil end
  return tier, member, tag
end

-- A tenant whose list the deletion emptied (`last`: that job) leaves every place it was in.
local function leave(tenant, last)
  redis.call('ZREM', k.heads, tenant)
  if redis.call('SREM', k.paused, tenant) == 1 then return end
  local slot = slot_of(last)
  local tier, member, tag
  if slot then tier, member, tag = unwait(slot, tenant) end
  if not member then
    for _, set in ipairs({ k.ready, k.over, k.capped }) do
      member, tag = find(set, HEX16 .. glob_escape(tenant), function(m) return m:sub(17) == tenant end)
      if member then
        tier = set
        break
      end
    end
  end
  if not member then return end
  redis.call('ZREM', tier, member)
  if tag > (tonumber(redis.call('HGET', k.state, 'v')) or 0) then redis.call('ZADD', k.fin, tag, tenant) end
end

local function delete_from(tenant)
  local list = k.prefix .. tenant
  local head = redis.call('LINDEX', list, 0)
  if not head or redis.call('LREM', list, 1, job) == 0 then return false end
  redis.call('HINCRBY', k.state, 'n', -1)
  local next_job = redis.call('LINDEX', list, 0)
  if not next_job then
    leave(tenant, job)
  elseif head == job then
    redis.call('ZADD', k.heads, job_time(next_job), tenant)
    local slot = slot_of(job)
    local tier, member, tag
    if slot then tier, member, tag = unwait(slot, tenant) end
    if member then
      rejoin(k, tier, member, tag)
      add_tokens(k, 1, FAIR_TOKEN_CAP)
    end
  end
  return true
end

if delete_from(ARGV[4]) then return { 1, ARGV[4] } end
if ARGV[5] == '' then return { 0, '0' } end
local step = redis.call('ZSCAN', k.heads, ARGV[5], 'COUNT', tonumber(ARGV[6]))
for i = 1, #step[2], 2 do
  local tenant = step[2][i]
  if tenant ~= ARGV[4] and delete_from(tenant) then return { 1, tenant } end
end
return { 0, step[1] }
