-- Moves the oldest jobs of a fair queue's `queue:<name>` list (pushed there by a client without the
-- gem, a raw LPUSH, a slot hand-over, or waiting since before fair fetch was on) into fair order, in
-- one step: the caller read them (LRANGE -n -1) and found their tenants; if the list's tail changed
-- meanwhile nothing is moved. A payload the caller found is not a job goes to the dead set in the same step. The
-- slots a plain queue's hand-over took for a job it pushed here are given back (its fair fetch takes them).
-- KEYS  queue:<name>, weights, dead (Sidekiq's dead set)
-- ARGV  base, queue, now (seconds, the dead set's score), then tenant, job as read, job as stored (with
--       its concurrency slot; "" for a payload that is not a job) triples, oldest job first
-- Returns the number of payloads taken from the list, or -1 when the tail was not what the caller read.
local k = fair_keys(ARGV[1], KEYS[2])
local queue = ARGV[2]
local n = (#ARGV - 3) / 3
-- Checked before the first write (Redis keeps what a failing script wrote): the arguments here; each job's
-- time, weight and slot are read so that no later step can fail (job_time, weight, slot_of).
if not finite(ARGV[3], 0) or n ~= math.floor(n) then
  return redis.error_reply('ERR adopt: base, queue, now, then tenant, job, stored triples')
end
local tail = redis.call('LRANGE', KEYS[1], -n, -1) -- newest first: the oldest job is last
if #tail ~= n then return -1 end
for i = 1, n do
  if tail[n - i + 1] ~= ARGV[2 + 3 * i] then return -1 end
end
redis.call('LTRIM', KEYS[1], 0, -(n + 1))
local adopted = 0
for i = 1, n do
  local stored = ARGV[3 + 3 * i]
  if stored == '' then
    redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2 + 3 * i])
  else
    push_job(k, ARGV[1 + 3 * i], stored, queue)
    adopted = adopted + 1
    -- A plain queue's hand-over (slots/common.lua) took the job's slots for it and pushed it here, where no plain
    -- run will claim them (the queue is fair now): they go back, and its fair fetch takes them anew. Left, the job
    -- would wait on its own slots until their leases ran out.
    local slot = slot_of(stored)
    for _, sc in ipairs(slot and scopes(slot) or {}) do
      local owner = redis.call('HGET', sc.runs, sc.jid)
      if owner and string.sub(owner, 1, #K_HANDED) == K_HANDED and redis.call('ZREM', sc.holders, sc.jid) == 1 then
        redis.call('HDEL', sc.runs, sc.jid)
        wake(sc, nil, true)
      end
    end
  end
end
redis.call('HINCRBY', k.state, K_STATE_N, adopted)
add_tokens(k, adopted, K_TOKEN_CAP)
return n
