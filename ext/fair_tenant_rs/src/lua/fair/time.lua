-- Fair by worker time (a queue configured `time`): a served job is charged its tenant's recent mean run time
-- (ms; the queue's mean for a tenant with none, else K_TIME_DEFAULT_MS), bounded by K_TIME_FLOOR_MS and
-- K_TIME_CAP_MS, so its tenant's next start tag is start + charge / 1000 / weight (seconds of worker time).
-- The acknowledgement brings the measured run time (bounded alike): the means learn it (an EWMA) and the
-- tenant's tag moves by (ran - charged) / 1000 / weight wherever it is (serve.lua's charge_back).
--   runtimes HASH  tenant -> mean run time (ms); a field goes when its tenant's finish tag is pruned from fin
--   state    HASH  K_STATE_MEAN: the queue's mean run time (ms)

local function bounded_ms(ms)
  if ms < K_TIME_FLOOR_MS then return K_TIME_FLOOR_MS end
  if ms > K_TIME_CAP_MS then return K_TIME_CAP_MS end
  return ms
end

-- What a job of `tenant` is charged when served (ms).
local function estimate(k, tenant)
  local mean = finite(redis.call('HGET', k.runtimes, tenant))
             or finite(redis.call('HGET', k.state, K_STATE_MEAN)) or K_TIME_DEFAULT_MS
  return bounded_ms(mean)
end

-- A mean moved towards a run time measured (the first one is taken as it is).
local function learn(hash, field, ran)
  local mean = finite(redis.call('HGET', hash, field)) -- NaN or text (by hand): learnt afresh
  if mean then mean = mean + (ran - mean) / K_TIME_EWMA_DIVISOR else mean = ran end
  redis.call('HSET', hash, field, mean)
end
