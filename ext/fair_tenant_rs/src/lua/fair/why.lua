-- Why a waiting job of a fair queue still waits (`why`): where it stands and what holds it.
-- KEYS  weights
-- ARGV  base, queue, tenant, job (its exact bytes, as the find script returned them)
-- Returns {ahead, jobs, place, rank, ready, weight, share, slot, rate}:
--   ahead   jobs of its tenant before it (false: the job is no longer waiting), jobs: the tenant's waiting jobs
--   place   the suffix of where its tenant is: K_READY (in the rotation), K_CAPPED (out of it: its next
--           job's concurrency scope is full), K_OVER (at an elastic cap: served only while no tenant under its
--           limit is ready), K_RATED (out of it until a rate window lets its next job start), K_PAUSED (weight
--           0, whether or not its turn has come to move it), or ''
--   rank    tenants of its place served before it (by start tag), ready: tenants in the rotation
--   weight  its weight in the queue; share: weight / the ready tenants' weights (itself counted), false when
--           more than K_WHY_SHARE_MAX tenants are ready
--   slot    false, or {scope, running, limit, elastic 0/1, {jid, lease ms left}...} of its next job's scope
--           (at most K_WHY_HOLDERS holders, longest lease first)
--   rate    in K_RATED: ms until it may start, else false
local k = fair_keys(ARGV[1], KEYS[1])
local queue, tenant, job = ARGV[2], ARGV[3], ARGV[4]
local list = k.prefix .. tenant
local ahead = redis.call('LPOS', list, job) or false
local w = weight(k.weights, tenant, queue)

local place, rank, member = '', 0, nil
if w == 0 or redis.call('SISMEMBER', k.paused, tenant) == 1 then -- weight 0: leaves the rotation at its turn
  place = K_PAUSED
else
  local tier, score, found
  member, tier, score, found = member_of(k, tenant)
  if member then place, rank = found, redis.call('ZRANK', tier, member) end
end

local ready = redis.call('ZCARD', k.ready)
local share = false
if w > 0 and ready <= K_WHY_SHARE_MAX then
  local total = place == K_READY and 0 or w
  for _, m in ipairs(redis.call('ZRANGE', k.ready, 0, -1)) do
    total = total + weight(k.weights, member_tenant(m), queue)
  end
  share = tostring(w / total)
end

local slot_info = false
local slot = holding_scope(k, queue, slot_of(redis.call('LINDEX', list, 0)), tenant)
if slot then
  local now = now_ms()
  local holders = {}
  local held = redis.call('ZRANGE', slot.holders, '+inf', now, 'BYSCORE', 'REV', 'LIMIT', 0, K_WHY_HOLDERS,
                          'WITHSCORES')
  for i = 1, #held, 2 do holders[#holders + 1] = { held[i], tonumber(held[i + 1]) - now } end
  slot_info = { scope_of(slot), redis.call('ZCOUNT', slot.holders, now, '+inf'),
                effective_limit(slot.limits, slot.sub, slot.default), slot.elastic and 1 or 0, holders }
end

local rate_wait = false
if place == K_RATED then
  rate_wait = math.max(tonumber(redis.call('ZSCORE', k.rated, member)) - now_ms(), 0)
end

return { ahead, redis.call('LLEN', list), place, rank, ready, tostring(w), share, slot_info, rate_wait }
