-- Moves the oldest jobs of a fair queue's `queue:<name>` list (pushed there by a client without the
-- gem, a raw LPUSH, a slot hand-over, or waiting since before fair fetch was on) into fair order, in
-- one step: the caller read them (LRANGE -n -1) and found their tenants; if the list's tail changed
-- meanwhile nothing is moved.
-- KEYS  queue:<name>, weights
-- ARGV  base, queue, cap, then tenant, job as read, job as stored (with its concurrency slot) triples,
--       oldest job first
-- Returns the number of jobs moved, or -1 when the tail was not what the caller read.
local k = fair_keys(ARGV[1], KEYS[2])
local queue = ARGV[2]
local n = (#ARGV - 3) / 3
local tail = redis.call('LRANGE', KEYS[1], -n, -1) -- newest first: the oldest job is last
if #tail ~= n then return -1 end
for i = 1, n do
  if tail[n - i + 1] ~= ARGV[2 + 3 * i] then return -1 end
end
redis.call('LTRIM', KEYS[1], 0, -(n + 1))
for i = 1, n do
  push_job(k, ARGV[1 + 3 * i], ARGV[3 + 3 * i], queue)
end
redis.call('HINCRBY', k.state, 'n', n)
add_tokens(k, n, tonumber(ARGV[3]))
return n
