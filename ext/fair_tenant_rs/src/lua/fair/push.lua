-- Pushes jobs into a fair queue: each to the back of its tenant's list, the tenant activated when
-- its list was empty; the queue is registered in Sidekiq's `queues` set (this replaces Sidekiq's
-- SADD + LPUSH), and idle fetchers get one wake-up token per job (at most `cap` waiting).
-- KEYS  queues (Sidekiq's set), weights
-- ARGV  base (the queue's key prefix), queue, cap, enqueued_at (s), then tenant, job pairs
-- Returns the jobs now waiting in the queue's fair backlog.
local k = fair_keys(ARGV[1], KEYS[2])
local queue = ARGV[2]
local now = tonumber(ARGV[4])
local pushed = 0
for i = 5, #ARGV, 2 do
  push_job(k, ARGV[i], ARGV[i + 1], queue, now)
  pushed = pushed + 1
end
redis.call('SADD', KEYS[1], queue)
add_tokens(k, pushed, tonumber(ARGV[3]))
return redis.call('HINCRBY', k.state, 'n', pushed)
