-- Recovery's look at the registered processes, a batch per call: the rule of fair/recovery.rs (judge).
-- KEYS  registry (identities with an in-flight list), suspects (identity -> first found gone, seconds of
--       Redis's clock)
-- ARGV  cursor (SSCAN's over the registry; "0" first), count (identities per call, about), lapse
--       (seconds), own identity (the sweeping process: never judged)
-- A process whose Sidekiq heartbeat key (its identity) exists stops being a suspect; one whose key is gone
-- and that was suspected `lapse` seconds ago or more is dead; one whose key is gone and that was not
-- suspected is suspected from now.
-- Returns {next cursor ("0": the whole registry was seen), suspects left in this batch, seconds until the
-- first of them is due (a string; "" when none), dead identities...}. SSCAN may return an identity twice.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local lapse = tonumber(ARGV[3])
if not lapse then return redis.error_reply('ERR liveness: the lapse must be a number') end -- before any write
local step = redis.call('SSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local reply = { step[1], 0, '' }
local soonest
local batch = step[2]
local suspected = #batch > 0 and redis.call('HMGET', KEYS[2], unpack(batch)) or {}
for i, identity in ipairs(batch) do
  if identity ~= ARGV[4] then
    local since = finite(suspected[i]) -- NaN or text (written by hand): suspected from now
    if redis.call('EXISTS', identity) == 1 then
      if since then redis.call('HDEL', KEYS[2], identity) end
    elseif since and now - since >= lapse then
      reply[#reply + 1] = identity
    else
      if not since then
        since = now
        redis.call('HSET', KEYS[2], identity, string.format('%.6f', now))
      end
      reply[2] = reply[2] + 1
      local due = since + lapse - now
      if not soonest or due < soonest then soonest = due end
    end
  end
end
if soonest then reply[3] = string.format('%.3f', soonest) end
return reply
