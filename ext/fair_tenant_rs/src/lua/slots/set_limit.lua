-- Sets (or, with an empty value, deletes) a runtime limit and applies it at once: free slots go
-- to parked jobs of every affected scope, then to fair-queue tenants waiting on it.
-- KEYS  limits, meta, limits index
-- ARGV  field (K_ALL_SCOPES for the whole tag, else a scope), value or '', base, tag
-- Returns {jobs handed a slot, 1 when more could go now}: each scope's hand-over is bounded (hand_over), so a
-- caller calls again (the same limit) until it says 0.
local limits, meta, index = KEYS[1], KEYS[2], KEYS[3]
local field, value, base = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
if value == '' then
  redis.call('HDEL', limits, field)
else
  redis.call('HSET', limits, field, value)
end
if redis.call('HLEN', limits) == 0 then
  redis.call('SREM', index, ARGV[4])
else
  redis.call('SADD', index, ARGV[4])
end

local handed, more = 0, 0
local entries = redis.call('HGETALL', meta)
for i = 1, #entries, 2 do
  local sub = entries[i]
  if field == K_ALL_SCOPES or field == sub then
    local default, lease = string.match(entries[i + 1], '^(%S+)' .. K_META_SEPARATOR .. '(%S+)$')
    local n, left = hand_over(slot_keys(base, sub, limits, default, lease), now)
    handed, more = handed + n, math.max(more, left)
    -- Fair-queue tenants waiting on it, as many as the plain queues' hand-over per call (the caller calls again).
    local woken = wake(scope_keys(ARGV[4], sub), effective_limit(limits, sub, default), true, K_HAND_OVER_BATCH)
    if woken >= K_HAND_OVER_BATCH then more = 1 end
  end
end
return { handed, more }
