-- Reclaims expired leases of every scope of one tag and hands freed slots to parked jobs and to fair-queue
-- tenants waiting on the scope, so neither is stranded when no job of its scope runs any more (a SIGKILLed
-- holder's slot comes back when its lease expires).
-- KEYS  limits, meta, tags
-- ARGV  base (key prefix of the tag's scopes), tag
-- Returns {jobs handed a slot, expired leases reclaimed}.
local limits, meta, tags = KEYS[1], KEYS[2], KEYS[3]
local now, base = now_ms(), ARGV[1]
local handed, reclaimed = 0, 0
local entries = redis.call('HGETALL', meta)
for i = 1, #entries, 2 do
  local sub = entries[i]
  local default, lease = string.match(entries[i + 1], '^(%S+)' .. K_META_SEPARATOR .. '(%S+)$')
  local holders, parked = base .. sub .. K_HOLDERS, base .. sub .. K_PARKED
  local limit = effective_limit(limits, sub, default)
  reclaimed = reclaimed + redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  handed = handed + hand_over(holders, parked, limit, now, now + (finite(lease, 1) or K_DEFAULT_LEASE_MS))
  local scope = scope_keys(ARGV[2], sub)
  wake(scope, limit, true) -- fair-queue tenants waiting on the scope (fair_caps.lua)
  if redis.call('ZCARD', holders) == 0 and redis.call('ZCARD', parked) == 0
      and redis.call('EXISTS', scope.waiting) == 0 then
    redis.call('HDEL', meta, sub)
  end
end
if redis.call('HLEN', meta) == 0 then
  redis.call('SREM', tags, ARGV[2])
end
return {handed, reclaimed}
