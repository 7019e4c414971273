-- Sets (value "" deletes) a weight, then brings the tenant out of pause in every fair queue where its
-- weight is now above 0 (its start tag is the queue's virtual time: a pause banks no credit). A queue of
-- K_FAIR_PAUSED_QUEUES_KEY (where tenants were paused) left with no paused tenant leaves that set.
-- KEYS  weights
-- ARGV  field, value, tenant, then queue names (Sidekiq's `queues`,
--       K_FAIR_PAUSED_QUEUES_KEY's and the caller's fair queues)
-- Returns the number of queues where the tenant resumed.
-- Checked before the first write: a weight the scripts could not read would be passed over (weight()).
if ARGV[2] ~= '' and not finite(ARGV[2], 0) then
  return redis.error_reply('ERR weight: the weight must be a finite number from 0 up')
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local tenant = ARGV[3]
local resumed = 0
for i = 4, #ARGV do
  local queue = ARGV[i]
  local k = fair_keys(fair_base(queue), KEYS[1])
  if redis.call('SISMEMBER', k.paused, tenant) == 1 and weight(KEYS[1], tenant, queue) > 0 then
    redis.call('SREM', k.paused, tenant)
    activate(k, tenant, queue)
    add_tokens(k, redis.call('LLEN', k.prefix .. tenant), K_TOKEN_CAP)
    resumed = resumed + 1
  end
  if redis.call('SCARD', k.paused) == 0 then redis.call('SREM', K_FAIR_PAUSED_QUEUES_KEY, queue) end
end
return resumed
