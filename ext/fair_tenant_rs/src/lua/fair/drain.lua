-- Switching fair fetch off for a queue: moves up to `max` jobs of its fair backlog back to
-- `queue:<name>` in fair order (Sidekiq then fetches them oldest-pushed first), paused tenants' jobs last.
-- Jobs in flight stay where they are (they are acknowledged or requeued as usual).
-- KEYS  queue:<name>, weights
-- ARGV  base, queue, max
-- Returns the number of jobs moved (fewer than max: the backlog is empty).
local k = fair_keys(ARGV[1], KEYS[2])
local queue, max = ARGV[2], tonumber(ARGV[3])
local moved = 0
while moved < max do
  local tenant, job = serve(k, queue, true) -- caps do not hold jobs back from leaving
  if not tenant then break end
  redis.call('LPUSH', KEYS[1], job)
  moved = moved + 1
end
if moved < max then
  for _, tenant in ipairs(redis.call('SMEMBERS', k.paused)) do
    local jobs = redis.call('LRANGE', k.prefix .. tenant, 0, -1)
    for _, job in ipairs(jobs) do
      redis.call('LPUSH', KEYS[1], job)
    end
    redis.call('DEL', k.prefix .. tenant)
    redis.call('ZREM', k.heads, tenant)
    redis.call('SREM', k.paused, tenant)
    redis.call('HINCRBY', k.state, 'n', -#jobs)
    moved = moved + #jobs
  end
end
if moved > 0 then redis.call('SADD', 'queues', queue) end
return moved
