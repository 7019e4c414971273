-- Registers one enqueue of a (job class, tenant) and picks the rule that fires, atomically.
-- KEYS[1]  sorted set: jid -> enqueue time (seconds, float)
-- ARGV     jid, now, window, ttl, keep, then (threshold, per) for every rule in order
-- Returns  the 0-based index of the last rule whose window count, this job included,
--          exceeds its threshold; -1 when none does.
--
-- Memory stays bounded whatever the volume: a rule with threshold T only needs to know
-- whether the (T+1)-th newest enqueue is inside its window, so the set keeps the `keep`
-- (= max T + 1) newest entries and nothing older than the longest window.
local key = KEYS[1]
local now = tonumber(ARGV[2])
local keep = tonumber(ARGV[5])

-- NX: a jid pushed again (scheduled job, retry, "retry now") keeps its first timestamp.
redis.call('ZADD', key, 'NX', now, ARGV[1])
local n = redis.call('ZCARD', key)
if n > keep then
  redis.call('ZREMRANGEBYRANK', key, 0, n - keep - 1)
  n = keep
end
n = n - redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (now - tonumber(ARGV[3])))
redis.call('EXPIRE', key, ARGV[4])

local chosen = -1
for i = 6, #ARGV, 2 do
  local threshold = tonumber(ARGV[i])
  if n > threshold then
    local rank = -(threshold + 1)
    local entry = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    if tonumber(entry[2]) >= now - tonumber(ARGV[i + 1]) then
      chosen = (i - 6) / 2
    end
  end
end
return chosen
