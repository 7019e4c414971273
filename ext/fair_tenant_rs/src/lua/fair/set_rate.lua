-- Sets (or, with an empty value, deletes) a runtime rate override and applies it at once: the tenants of a fair
-- queue waiting in `rated` whose next job's scope it covers rejoin the rotation (start tag max(theirs, v), an
-- idle fetcher woken for each), so the next fetch checks them under the windows now in force (back to `rated`
-- until the new instant if still over). Bounded: one call reads at most `count` members of one queue's `rated`,
-- latest instant first from reverse rank `from`; the caller calls again from the returned rank until done. A
-- member that joins later (a later instant) only shifts the rest toward being read twice; one that leaves (its
-- instant came: earliest first) rejoins anyway.
-- The flow takes several calls (one queue after another), so the call that writes the override also marks its
-- recheck as under way (`rechecks`: member -> the writer's nonce), and the writer's last call (queue '',
-- write '0') removes the mark if it is still the writer's: a recheck cut short (the writer killed, a call
-- refused) is finished by a recovery sweep, which reads the mark and calls again without writing. A recheck
-- run twice only brings a tenant back to be checked again.
-- KEYS  overrides (RATE_LIMITS_PREFIX<len>:<tag>), overrides index, rechecks (K_RATE_RECHECKS_KEY)
-- ARGV  field (K_ALL_SCOPES for the whole tag, else a sub), value ("limit:per ms,...") or '', tag,
--       write ('1': write the override first; else only apply it), queue ('': none), from, count,
--       recheck member ('': no mark), nonce
-- Returns {tenants brought back, the reverse rank to call again from (-1: this queue is done)}.
local overrides, index, rechecks = KEYS[1], KEYS[2], KEYS[3]
local field, value, tag = ARGV[1], ARGV[2], ARGV[3]
local queue, from, count = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local member, nonce = ARGV[8] or '', ARGV[9] or ''
if queue ~= '' and not (from and count) then -- checked before the first write
  return redis.error_reply('ERR set_rate: from and count must be numbers')
end
if ARGV[4] == '1' then
  if member ~= '' then redis.call('HSET', rechecks, member, nonce) end
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
end
if queue == '' then
  if ARGV[4] ~= '1' and member ~= '' and redis.call('HGET', rechecks, member) == nonce then
    redis.call('HDEL', rechecks, member) -- done, and no newer write of the same scope marked it since
  end
  return {0, -1}
end

local k = fair_keys(fair_base(queue), K_FAIR_WEIGHTS_KEY)
local members = redis.call('ZREVRANGE', k.rated, from, from + count - 1)
local back = 0
for _, member in ipairs(members) do
  local rate = rate_of(redis.call('LINDEX', k.prefix .. member_tenant(member), 0))
  local named = false
  for _, r in ipairs(rate and rates(rate) or {}) do
    if r.tag == tag and (field == K_ALL_SCOPES or r.sub == field) then named = true end
  end
  if named then
    local kept = finite(redis.call('HGET', k.rtags, member)) or 0
    redis.call('HDEL', k.rtags, member)
    rejoin(k, k.rated, member, kept)
    back = back + 1
  end
end
if back > 0 then add_tokens(k, back, K_TOKEN_CAP) end
if #members < count then return {back, -1} end
return {back, from + count - back}
