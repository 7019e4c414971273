-- Deletes a fair queue's backlog (Sidekiq::Queue#clear, the Queues page's Delete): every waiting job of
-- every tenant (held back by a cap or not), and the queue's scheduling state. Jobs in flight are not touched
-- (their slots are given back with their acknowledgements).
-- KEYS  (none)
-- ARGV  base
-- Returns the number of jobs deleted.
local k = fair_keys(ARGV[1], '')
local deleted = 0
local function drop(tenant)
  deleted = deleted + redis.call('LLEN', k.prefix .. tenant)
  redis.call('DEL', k.prefix .. tenant)
end
for _, set in ipairs({ k.ready, k.capped, k.over }) do
  for _, member in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    drop(member:sub(17))
  end
end
for _, tenant in ipairs(redis.call('SMEMBERS', k.paused)) do
  drop(tenant)
end
redis.call('DEL', k.ready, k.capped, k.over, k.paused, k.sig, k.heads)
redis.call('HSET', k.state, 'n', 0)
return deleted
