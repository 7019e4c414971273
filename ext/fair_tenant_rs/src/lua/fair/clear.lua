-- Deletes a fair queue's backlog (Sidekiq::Queue#clear, the Queues page's Delete), `max` tenants per call (and
-- no more once K_CALL_BYTES of held-back tenants' head jobs were read for their scopes, past the first):
-- every waiting job of a tenant (held back by a cap or not) with its place in the scheduling state (ready,
-- capped or over and its waiting entry on its scope, paused, heads), so the state is whole between calls and
-- a job pushed meanwhile is either deleted with its tenant or kept. A list is UNLINKed (freed outside the
-- script). The call that finds nothing left deletes the wake-up tokens. Jobs in flight are not touched
-- (their slots are given back with their acknowledgements). The caller calls again until done.
-- KEYS  (none)
-- ARGV  base, queue, max
-- Returns {jobs deleted, 1 when more may be left else 0}.
local k = fair_keys(ARGV[1], '')
local queue, max = ARGV[2], tonumber(ARGV[3])
local deleted, tenants, read = 0, 0, 0

local function room()
  return tenants < max and read < K_CALL_BYTES
end

local function drop(tenant)
  local list = k.prefix .. tenant
  local len = redis.call('LLEN', list)
  if len > 0 then
    redis.call('UNLINK', list)
    redis.call('HINCRBY', k.state, K_STATE_N, -len)
    deleted = deleted + len
  end
  redis.call('ZREM', k.heads, tenant)
  redis.call('HDEL', k.members, tenant)
  tenants = tenants + 1
end

for _, tier in ipairs({ k.ready, k.capped, k.over, k.rated }) do
  if not room() then break end
  for _, member in ipairs(redis.call('ZRANGE', tier, 0, max - tenants - 1)) do
    if not room() then break end
    local tenant = member_tenant(member)
    if tier ~= k.ready then
      local head = redis.call('LINDEX', k.prefix .. tenant, 0)
      read = read + (head and #head or 0)
      local slot = slot_of(head)
      if slot then wait_rem(slot.waiting, waiting_entry(k, queue, tier, member)) end
    end
    redis.call('ZREM', tier, member)
    drop(tenant)
  end
end
if room() then
  for _, tenant in ipairs(redis.call('SPOP', k.paused, max - tenants)) do
    drop(tenant)
  end
end
if room() then -- tenants in heads alone (a state left half-made by hand)
  for _, tenant in ipairs(redis.call('ZRANGE', k.heads, 0, max - tenants - 1)) do
    drop(tenant)
  end
end
if room() then
  redis.call('DEL', k.sig, k.rtags, k.members)
  redis.call('HSET', k.state, K_STATE_N, 0)
  return { deleted, 0 }
end
return { deleted, 1 }
