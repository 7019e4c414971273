-- Reclaims expired leases of every scope of one tag and hands freed slots to parked jobs, so a
-- parked job is never stranded when no job of its scope runs any more.
-- KEYS  limits, meta, tags
-- ARGV  base (key prefix of the tag's scopes), tag
-- Returns {jobs handed a slot, expired leases reclaimed}.
local limits, meta, tags = KEYS[1], KEYS[2], KEYS[3]
local now, base = now_ms(), ARGV[1]
local handed, reclaimed = 0, 0
local entries = redis.call('HGETALL', meta)
for i = 1, #entries, 2 do
  local sub = entries[i]
  local default, lease = string.match(entries[i + 1], '^(%S+) (%S+)$')
  local holders, parked = base .. sub .. ':holders', base .. sub .. ':parked'
  local limit = effective_limit(limits, sub, default)
  reclaimed = reclaimed + redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  handed = handed + hand_over(holders, parked, limit, now, now + tonumber(lease))
  if redis.call('ZCARD', holders) == 0 and redis.call('ZCARD', parked) == 0 then
    redis.call('HDEL', meta, sub)
  end
end
if redis.call('HLEN', meta) == 0 then
  redis.call('SREM', tags, ARGV[2])
end
return {handed, reclaimed}
