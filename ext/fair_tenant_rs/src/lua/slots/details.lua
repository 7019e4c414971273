-- What the Web tab, the API and the CLI show about one scope; reads only.
-- KEYS  holders, parked, limits, meta
-- ARGV  sub
-- Returns {holders (jid, lease expiry ms, ...), parked count, oldest parked (payload, enqueue ms) or {},
--          the scope's limit or false, the tag-wide limit or false, the scope's meta entry or false}
local holders, parked, limits, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
return {
  redis.call('ZRANGE', holders, 0, -1, 'WITHSCORES'),
  redis.call('ZCARD', parked),
  redis.call('ZRANGE', parked, 0, 0, 'WITHSCORES'),
  redis.call('HGET', limits, ARGV[1]),
  redis.call('HGET', limits, K_ALL_SCOPES),
  redis.call('HGET', meta, ARGV[1]),
}
