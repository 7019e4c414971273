-- Deletes one waiting job of a fair queue (Sidekiq::JobRecord#delete, the Web queue page's Delete): the exact
-- payload, looked for in `tenant`'s list, then, when a scan cursor is given, in the lists of the tenants one
-- ZSCAN step of `heads` returns from it (`count` hint). The scheduling state follows as when a job is
-- served: `n` drops by one; a tenant whose list empties leaves heads and ready / over / capped / paused (and
-- its waiting entry on the job's scope), its start tag kept in fin while ahead of v, so coming back it
-- starts where its next job would have; a tenant whose oldest job went has its next job's time in heads
-- and, if it was held back on the deleted job's scope, rejoins the rotation with a wake-up token (its next
-- job may need no slot, or another one).
-- A tenant's only job (not paused): its member in ready / over / capped / rated is read from the members
-- index; in a state without it (an older gem's), searched at most one ZSCAN step (`search` hint) per tier per
-- call, the caller calling again with the search's place until it is found and the job deleted with it; a
-- tenant found in none of them (moved meanwhile) leaves heads, and serving forgets a member left with an empty
-- list.
-- KEYS  (none)
-- ARGV  base, queue, job, tenant, cursor ("": only `tenant`'s list), count, search, then, going on with a
--       search: tier (1 ready, 2 over, 3 capped, 4 rated), ZSCAN cursor
-- Returns {1, tenant} when deleted; {2, tenant, tier, cursor}: call again (the search goes on); else
-- {0, next cursor} ("0": the scan is over, or none was asked).
local k = fair_keys(ARGV[1], '')
local queue, job, search = ARGV[2], ARGV[3], tonumber(ARGV[7])
local TIERS = { k.ready, k.over, k.capped, k.rated }

local function only_job(tenant)
  local list = k.prefix .. tenant
  return redis.call('LLEN', list) == 1 and redis.call('LINDEX', list, 0) == job
    and redis.call('SISMEMBER', k.paused, tenant) == 0
end

-- The job and the tenant's place go, the tenant's member in `tier` (if found) with its waiting entry.
local function remove_only(tenant, tier, member, tag)
  redis.call('DEL', k.prefix .. tenant)
  redis.call('HINCRBY', k.state, K_STATE_N, -1)
  redis.call('ZREM', k.heads, tenant)
  if not member then return { 1, tenant } end
  redis.call('ZREM', tier, member)
  redis.call('HDEL', k.members, tenant)
  if tier == k.rated then
    tag = finite(redis.call('HGET', k.rtags, member)) or 0
    redis.call('HDEL', k.rtags, member)
  end
  local slot = slot_of(job)
  if slot and tier ~= k.ready then
    for _, s in ipairs(scopes(slot)) do wait_rem(s.waiting, waiting_entry(k, queue, tier, member)) end
  end
  if tag > vtime(k) then redis.call('ZADD', k.fin, tag, tenant) end
  return { 1, tenant }
end

-- One ZSCAN step per tier for the member of `tenant`, whose only job is the one to delete, from tier `at`'s
-- `cursor` on (a tier read whole in one step, as a small one is, passes the search on to the next).
local function search_step(tenant, at, cursor)
  for tier = at, #TIERS do
    local step = redis.call('ZSCAN', TIERS[tier], cursor, 'MATCH', ACTIVATION .. glob_escape(tenant), 'COUNT', search)
    for i = 1, #step[2], 2 do
      if member_tenant(step[2][i]) == tenant then
        return remove_only(tenant, TIERS[tier], step[2][i], tonumber(step[2][i + 1]))
      end
    end
    if step[1] ~= '0' then return { 2, tenant, tier, step[1] } end
    cursor = '0'
  end
  return remove_only(tenant)
end

local function delete_from(tenant)
  if only_job(tenant) then
    local member, tier, tag = indexed_member(k, tenant)
    if member then return remove_only(tenant, tier, member, tag) end
    return search_step(tenant, 1, '0') -- a state without the index: searched a step a call
  end
  if take_waiting(k, queue, tenant, job) then return { 1, tenant } end
  return nil
end

if ARGV[8] then
  if only_job(ARGV[4]) then return search_step(ARGV[4], tonumber(ARGV[8]), ARGV[9]) end
  return delete_from(ARGV[4]) or { 0, '0' }
end
local found = delete_from(ARGV[4])
if found then return found end
if ARGV[5] == '' then return { 0, '0' } end
local step = redis.call('ZSCAN', k.heads, ARGV[5], 'COUNT', tonumber(ARGV[6]))
for i = 1, #step[2], 2 do
  local tenant = step[2][i]
  if tenant ~= ARGV[4] then
    found = delete_from(tenant)
    if found then return found end
  end
end
return { 0, step[1] }
