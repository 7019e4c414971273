-- Sets (or, with an empty value, deletes) a runtime rate override and applies it at once: the tenants of the
-- given fair queues waiting in `rated` whose next job's scope it covers rejoin the rotation (start tag
-- max(theirs, v), an idle fetcher woken for each), so the next fetch checks them under the windows now in force
-- (back to `rated` until the new instant if still over).
-- KEYS  overrides (RATE_LIMITS_PREFIX<len>:<tag>), overrides index
-- ARGV  field (K_ALL_SCOPES for the whole tag, else a sub), value ("limit:per ms,...") or '', tag, queues...
-- Returns the number of tenants brought back.
local overrides, index = KEYS[1], KEYS[2]
local field, value, tag = ARGV[1], ARGV[2], ARGV[3]
if value == '' then
  redis.call('HDEL', overrides, field)
else
  redis.call('HSET', overrides, field, value)
end
if redis.call('HLEN', overrides) == 0 then
  redis.call('SREM', index, tag)
else
  redis.call('SADD', index, tag)
end

local back = 0
for i = 4, #ARGV do
  local k = fair_keys(fair_base(ARGV[i]), K_FAIR_WEIGHTS_KEY)
  local members = redis.call('ZRANGE', k.rated, 0, -1)
  local woken = 0
  for _, member in ipairs(members) do
    local rate = rate_of(redis.call('LINDEX', k.prefix .. member_tenant(member), 0))
    if rate and rate.tag == tag and (field == K_ALL_SCOPES or rate.sub == field) then
      local kept = tonumber(redis.call('HGET', k.rtags, member)) or 0
      redis.call('HDEL', k.rtags, member)
      rejoin(k, k.rated, member, kept)
      woken = woken + 1
    end
  end
  if woken > 0 then add_tokens(k, woken, K_TOKEN_CAP) end
  back = back + woken
end
return back
