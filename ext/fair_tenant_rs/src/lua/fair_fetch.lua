-- Takes the next job from the first of the given queues that has one, in the order Sidekiq's queue
-- weights chose. From a fair queue: the next job in fair order, moved to the process's in-flight list
-- in the same step (a job is always in exactly one place). From a plain queue: RPOP, as BasicFetch.
-- Acknowledgements of jobs that finished since the last call come first (they ride along, so a job costs
-- one round trip: its fetch).
-- KEYS  inflight (this process's list), weights
-- ARGV  woken ("1": the caller already took a wake-up token), n, then n in-flight entries to drop, then
--       base, queue pairs (base "" for a plain queue)
-- Returns {queue, tenant, job, entry} (entry: what acknowledges it; tenant and entry false for a
-- plain queue), {queue} when a fair queue's `queue:<name>` list holds jobs to adopt first, or nil.
local woken = ARGV[1] == '1'
local acks = tonumber(ARGV[2])
for i = 3, 2 + acks do
  redis.call('LREM', KEYS[1], -1, ARGV[i]) -- from the tail, where the oldest in-flight jobs are
end
for i = 3 + acks, #ARGV, 2 do
  local queue = ARGV[i + 1]
  if ARGV[i] == '' then
    local job = redis.call('RPOP', 'queue:' .. queue)
    if job then return { queue, false, job, false } end
  elseif redis.call('LLEN', 'queue:' .. queue) > 0 then
    return { queue }
  else
    local k = fair_keys(ARGV[i], KEYS[2])
    local tenant, job = serve(k, queue)
    if tenant then
      if not woken then redis.call('RPOP', k.sig) end
      local entry = inflight_entry(queue, tenant, job)
      redis.call('LPUSH', KEYS[1], entry)
      return { queue, tenant, job, entry }
    end
  end
end
return false
