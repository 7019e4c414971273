-- One page of a fair queue's waiting tenants in `heads` order (oldest waiting job first, as far as heads knows:
-- serving does not read a tenant's next job), each with its oldest job's exact time, and its capped tenants.
-- KEYS  weights
-- ARGV  base, queue, offset, limit, capped (most capped tenants listed; default 50), rated (most rate-held
--       tenants listed; default 0)
-- Returns {backlog, waiting tenants, {tenant, oldest enqueue time, jobs, weight or false, paused 0/1,
--          mean run time ms or false}..., capped tenants, {tenant, running, limit, elastic 0/1, in force 0/1, jobs,
--          scope}..., rated tenants, {tenant, ms until it may start (-1: never), jobs, scope,
--          {limit, per ms, starts}...}..., the queue's mean run time ms or false}.
-- Mean run times are those a queue fair by worker time (time.lua) learnt; false where none was.
-- Capped tenants are those of `capped` (a static cap: in force while there) and `over` (an elastic cap: in
-- force while a tenant under its limit is ready, lifted while it runs on spare threads), lowest start tag
-- first. Running and limit are those of the scope of the tenant's next job (running: holders whose lease has
-- not expired, as the slot stats count them), false when that job carries no slot; scope is
-- {'tenant', tenant, queue}, {'key', key} or false.
-- Rated tenants are those of `rated` (waiting for a rate window), soonest first: the windows of their next
-- job's scope with the starts each counts now (as the fetch counts them), false when that job carries none.
local k = fair_keys(ARGV[1], KEYS[1])
local queue = ARGV[2]
local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local capped_max = math.max(tonumber(ARGV[5]) or 50, 0)
local rows = {}
local page = redis.call('ZRANGE', k.heads, offset, offset + limit - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local tenant = page[i]
  local w = redis.call('HMGET', KEYS[1], tenant .. K_WEIGHT_SEPARATOR .. queue, tenant)
  local oldest = string.format('%.17g', head_time(k, tenant, tonumber(page[i + 1]))) -- (heads: at most it)
  rows[#rows + 1] = { tenant, oldest, redis.call('LLEN', k.prefix .. tenant), w[1] or w[2] or false,
                      redis.call('SISMEMBER', k.paused, tenant), redis.call('HGET', k.runtimes, tenant) }
end

local held = {}
for _, tier in ipairs(capped_max > 0 and { k.capped, k.over } or {}) do
  local members = redis.call('ZRANGE', tier, 0, capped_max - 1, 'WITHSCORES')
  for i = 1, #members, 2 do
    held[#held + 1] = { member = members[i], start = tonumber(members[i + 1]), static = tier == k.capped }
  end
end
table.sort(held, function(a, b)
  if a.start ~= b.start then return a.start < b.start end
  return a.member < b.member
end)

local capped = {}
local ready = redis.call('EXISTS', k.ready) == 1
local now = now_ms()
for i = 1, math.min(#held, capped_max) do
  local h = held[i]
  local tenant = member_tenant(h.member)
  local list = k.prefix .. tenant
  local slot = holding_scope(k, queue, slot_of(redis.call('LINDEX', list, 0)), tenant)
  local running, cap, elastic, scope = false, false, not h.static, false
  if slot then
    running = redis.call('ZCOUNT', slot.holders, now, '+inf')
    cap = effective_limit(slot.limits, slot.sub, slot.default)
    elastic = slot.elastic
    scope = scope_of(slot)
  end
  capped[#capped + 1] = { tenant, running, cap, elastic and 1 or 0, (h.static or ready) and 1 or 0,
                          redis.call('LLEN', list), scope }
end

local rated = {}
local rated_max = math.max(tonumber(ARGV[6]) or 0, 0)
if rated_max > 0 then
  local members = redis.call('ZRANGE', k.rated, 0, rated_max - 1, 'WITHSCORES')
  for i = 1, #members, 2 do
    local tenant = member_tenant(members[i])
    local list = k.prefix .. tenant
    local rate = rate_of(redis.call('LINDEX', list, 0))
    local due = members[i + 1] == 'inf' and -1 or math.max(math.ceil(tonumber(members[i + 1]) - now), 0)
    local windows, scope = {}, false
    if rate then
      local checks, held_until = rates_check(rate)
      -- The scope that holds the tenant: the one whose window allows its start last (else the first).
      local shown = checks[1]
      for _, c in ipairs(checks) do
        if held_until and c[4] == held_until then
          shown = c
          break
        end
      end
      rate = shown[1]
      local at, read = shown[2], shown[3]
      for _, w in ipairs(rate.windows) do
        local starts = 0
        for _, b in ipairs(read[w[2]] or {}) do starts = starts + b[2] end
        windows[#windows + 1] = { w[1], w[2], starts }
      end
      if due >= 0 and at > now then due = math.max(math.ceil(tonumber(members[i + 1]) - at), 0) end
      scope = scope_of(rate)
    end
    rated[#rated + 1] = { tenant, due, redis.call('LLEN', list), scope, windows }
  end
end

return { tonumber(redis.call('HGET', k.state, K_STATE_N)) or 0, redis.call('ZCARD', k.heads), rows,
         redis.call('ZCARD', k.capped) + redis.call('ZCARD', k.over), capped, redis.call('ZCARD', k.rated), rated,
         redis.call('HGET', k.state, K_STATE_MEAN) }
