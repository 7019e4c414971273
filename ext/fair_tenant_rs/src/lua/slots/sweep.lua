-- Reclaims expired leases of every scope of one tag and hands freed slots to parked jobs and to fair-queue
-- tenants waiting on the scope, so neither is stranded when no job of its scope runs any more (a SIGKILLed
-- holder's slot comes back when its lease expires).
-- KEYS  limits, meta, tags
-- ARGV  base (key prefix of the tag's scopes), tag
-- Returns {jobs handed a slot, expired leases reclaimed, 1 when more could go now (bounded per scope)}.
local limits, meta, tags = KEYS[1], KEYS[2], KEYS[3]
local now, base = now_ms(), ARGV[1]
local handed, reclaimed, more = 0, 0, 0
local entries = redis.call('HGETALL', meta)
for i = 1, #entries, 2 do
  local sub = entries[i]
  local default, lease = string.match(entries[i + 1], '^(%S+)' .. K_META_SEPARATOR .. '(%S+)$')
  local s = slot_keys(base, sub, limits, default, lease)
  local holders, parked = s.holders, s.parked
  reclaimed = reclaimed + reclaim(s, now)
  local n, left = hand_over(s, now)
  handed, more = handed + n, math.max(more, left)
  local scope = scope_keys(ARGV[2], sub)
  wake(scope, effective_limit(limits, sub, default), true) -- fair-queue tenants waiting on the scope (fair_caps.lua)
  if redis.call('ZCARD', holders) == 0 and redis.call('ZCARD', parked) == 0
      and redis.call('EXISTS', scope.waiting) == 0 then
    redis.call('HDEL', meta, sub)
  end
end
if redis.call('HLEN', meta) == 0 then
  redis.call('SREM', tags, ARGV[2])
end
return {handed, reclaimed, more}
