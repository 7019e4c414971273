-- Takes a slot for a job about to run, or parks it, in one atomic step.
-- KEYS  holders, parked, limits, meta, tags
-- ARGV  jid, lease (ms), default limit, sub, tag, payload, enqueue score
-- Returns 0 acquired, 1 already held (handed over, or a re-acquire), 2 parked.
local holders, parked, limits, meta, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local jid = ARGV[1]
local now = now_ms()
local lease_until = now + (finite(ARGV[2], 1) or K_DEFAULT_LEASE_MS)

if redis.call('ZSCORE', holders, jid) then
  redis.call('ZADD', holders, lease_until, jid)
  return 1
end

-- Expired leases (a worker that died) are dropped only when they stand in the way: a scope with
-- free slots costs no ZREMRANGEBYSCORE.
local limit = effective_limit(limits, ARGV[4], ARGV[3])
local free = limit - redis.call('ZCARD', holders)
if free <= 0 and redis.call('ZREMRANGEBYSCORE', holders, '-inf', now) > 0 then
  free = limit - redis.call('ZCARD', holders)
end
local score = finite(ARGV[7]) or now -- the job's enqueue time (ms); unreadable (NaN, inf): now
if free > 0 then
  local oldest = redis.call('ZRANGE', parked, 0, 0, 'WITHSCORES')
  if oldest[1] == nil or score < tonumber(oldest[2]) then
    redis.call('ZADD', holders, lease_until, jid)
    return 0
  end
end

-- No slot for this job (or older jobs wait for one): park it durably, remember the scope for
-- the sweep, and hand any free slot to the oldest parked jobs. Sidekiq 8's enqueue times are whole
-- milliseconds, shared by the jobs pushed within one: such a job parks 1/4096 ms (exact in a double
-- at today's epoch) after the last one parked with its time, so they are handed over in the order they came.
if score == math.floor(score) then
  local last = redis.call('ZREVRANGEBYSCORE', parked, string.format('(%.17g', score + 1), score, 'WITHSCORES',
    'LIMIT', 0, 1)
  if last[2] then score = math.min(tonumber(last[2]) + 1 / 4096, score + 4095 / 4096) end
end
redis.call('ZADD', parked, score, ARGV[6])
redis.call('HSET', meta, ARGV[4], ARGV[3] .. K_META_SEPARATOR .. ARGV[2])
redis.call('SADD', tags, ARGV[5])
if free > 0 then
  hand_over(holders, parked, limit, now, lease_until)
end
return 2
