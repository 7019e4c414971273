-- Pushes jobs into a fair queue: each to the back of its tenant's list, the tenant activated when
-- its list was empty; the queue is registered in Sidekiq's `queues` set (this replaces Sidekiq's
-- SADD + LPUSH), and idle fetchers get one wake-up token per job (at most `cap` waiting).
-- KEYS  queues (Sidekiq's set), weights
-- ARGV  base (the queue's key prefix), queue, cap, enqueued_at (s), then tenant, job pairs
-- Returns the jobs now waiting in the queue's fair backlog.
local k = fair_keys(ARGV[1], KEYS[2])
local queue, cap = ARGV[2], tonumber(ARGV[3])
local now = finite(ARGV[4], 0, 1e11) -- else each job's own time (job_time: Redis's time when unreadable)
if not cap or #ARGV % 2 ~= 0 then return redis.error_reply('ERR push: base, queue, cap, enqueued_at, then pairs') end
local pushed = 0
for i = 5, #ARGV, 2 do
  push_job(k, ARGV[i], ARGV[i + 1], queue, now)
  pushed = pushed + 1
end
redis.call('SADD', KEYS[1], queue)
add_tokens(k, pushed, cap)
return redis.call('HINCRBY', k.state, K_STATE_N, pushed)
