-- Pushes jobs into a fair queue: each to the back of its tenant's list, the tenant activated when
-- its list was empty; the queue is registered in Sidekiq's `queues` set (this replaces Sidekiq's
-- SADD + LPUSH), and idle fetchers get one wake-up token per job (at most K_TOKEN_CAP waiting). A push that
-- activates no tenant runs four commands (RPUSH, HINCRBY, SADD, LLEN) and makes only the keys they name
-- (a string made in Lua costs time): the queue's other keys only when a tenant is activated.
-- A call with an id (each call of a bulk push) runs once: sent again (its reply lost, or its pipeline sent
-- again after one of its calls was refused) it finds the id's key, set by its end, and pushes nothing.
-- KEYS  queues (Sidekiq's set), weights
-- ARGV  base (the queue's key prefix), queue, enqueued_at (s; '': each job's own, read from its head when its
--       tenant is activated), id ('': none), then tenant, job pairs;
--       or, one job (a client's push: the fewest arguments to send), queue, tenant, job: the base made from the
--       queue, each job's own time, no id
-- Returns the jobs now waiting in the queue's fair backlog.
local base, queue, at, id, first
if #ARGV == 3 then
  queue = ARGV[1]
  base, at, id, first = fair_base(queue), '', '', 2
else
  base, queue, at, id, first = ARGV[1], ARGV[2], ARGV[3], ARGV[4], 5
  if #ARGV < 4 or #ARGV % 2 ~= 0 then
    return redis.error_reply('ERR push: base, queue, enqueued_at, id, then tenant, job pairs; or queue, tenant, job')
  end
end
local k = fair_keys(base, KEYS[2]) -- each key made when read: a push that activates no tenant makes 3
-- The call's id key, set once every job is in: a call that failed halfway (a key of the wrong type, written by
-- hand), sent again, pushes all its jobs again (a job twice rather than one lost).
local done = id ~= '' and k.push_call .. id
if done and redis.call('EXISTS', done) == 1 then
  return tonumber(redis.call('HGET', k.state, K_STATE_N)) or 0 -- this very call ran already
end
local pushed = 0
for i = first, #ARGV, 2 do
  local tenant, job = ARGV[i], ARGV[i + 1]
  if redis.call('RPUSH', k.prefix .. tenant, job) == 1 then
    redis.call('ZADD', k.heads, finite(at, 0, 1e11) or job_time(job), tenant)
    activate(k, tenant, queue)
  end
  pushed = pushed + 1
end
local waiting = redis.call('HINCRBY', k.state, K_STATE_N, pushed)
redis.call('SADD', KEYS[1], queue)
for _ = 1, math.min(pushed, K_TOKEN_CAP - redis.call('LLEN', k.sig)) do
  redis.call('LPUSH', k.sig, '1')
end
if done then redis.call('SET', done, 1, 'EX', K_PUSH_CALL_TTL) end
return waiting
