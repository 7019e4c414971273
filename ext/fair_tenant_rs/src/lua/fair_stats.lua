-- One page of a fair queue's waiting tenants, oldest waiting job first.
-- KEYS  weights
-- ARGV  base, queue, offset, limit
-- Returns {backlog, waiting tenants, {tenant, oldest enqueue time, jobs, weight or false, paused 0/1}...}.
local k = fair_keys(ARGV[1], KEYS[1])
local queue = ARGV[2]
local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local rows = {}
local page = redis.call('ZRANGE', k.heads, offset, offset + limit - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local tenant = page[i]
  local w = redis.call('HMGET', KEYS[1], tenant .. '\n' .. queue, tenant)
  rows[#rows + 1] = { tenant, page[i + 1], redis.call('LLEN', k.prefix .. tenant), w[1] or w[2] or false,
                      redis.call('SISMEMBER', k.paused, tenant) }
end
return { tonumber(redis.call('HGET', k.state, 'n')) or 0, redis.call('ZCARD', k.heads), rows }
