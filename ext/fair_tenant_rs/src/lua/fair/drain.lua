-- Switching fair fetch off for a queue: moves up to `max` jobs of its fair backlog back to
-- `queue:<name>` in fair order (Sidekiq then fetches them oldest-pushed first), paused tenants' jobs last,
-- each paused tenant's oldest first. Jobs in flight stay where they are (they are acknowledged or requeued
-- as usual, those requeued or recovered from now on to `queue:<name>`: the queue is marked switched off,
-- K_FAIR_OFF_KEY, until a process boots with it fair), and no more than K_CALL_BYTES of jobs past the first.
-- The caller calls again until none may be left; a drain cut short is finished by a later recovery sweep
-- (FairOff.finish).
-- KEYS  queue:<name>, weights
-- ARGV  base, queue, max
-- Returns {jobs moved, 1 when more may be left else 0}.
local k = fair_keys(ARGV[1], KEYS[2])
local queue, max = ARGV[2], tonumber(ARGV[3])
redis.call('SADD', K_FAIR_OFF_KEY, queue)
local moved, bytes, largest = 0, 0, 0
local function full()
  return moved >= max or (moved > 0 and bytes >= K_CALL_BYTES)
end
while not full() do
  local tenant, job = serve(k, queue, true) -- caps do not hold jobs back from leaving
  if not tenant then break end
  redis.call('LPUSH', KEYS[1], job)
  moved, bytes = moved + 1, bytes + #job
  if #job > largest then largest = #job end
end
count_taken(k)
while not full() do
  local tenant = redis.call('SRANDMEMBER', k.paused)
  if not tenant then break end
  local list = k.prefix .. tenant
  local jobs = redis.call('LRANGE', list, 0, byte_page(bytes, largest, max - moved) - 1)
  for _, job in ipairs(jobs) do
    bytes = bytes + #job
    if #job > largest then largest = #job end
  end
  if #jobs > 0 then redis.call('LPUSH', KEYS[1], unpack(jobs)) end
  redis.call('LTRIM', list, #jobs, -1)
  redis.call('HINCRBY', k.state, K_STATE_N, -#jobs)
  moved = moved + #jobs
  local next_job = redis.call('LINDEX', list, 0)
  if next_job then
    redis.call('ZADD', k.heads, job_time(next_job), tenant)
  else
    redis.call('ZREM', k.heads, tenant)
    redis.call('SREM', k.paused, tenant)
  end
end
if moved > 0 then redis.call('SADD', 'queues', queue) end
return { moved, full() and 1 or 0 }
