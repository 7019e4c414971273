-- When the oldest waiting job a free thread could start now was enqueued (Sidekiq::Queue#latency, which
-- autoscalers read): tenants from `heads`, oldest job first, passing over paused ones (in `paused`, or of
-- weight 0 and not moved there yet), ones held back by a static cap (in `capped`) and ones waiting for a rate
-- window (in `rated`, or whose next job's window is full). Tenants over an elastic
-- cap (`over`) count: spare threads serve them. Read-only; at most `steps` tenants are looked at (passed over,
-- or their head job read), then the oldest time seen is taken. Held back means a member of `capped` among its first `read` (lowest start tags),
-- or, when it has more, a tenant whose next job's static scope is full.
-- KEYS  weights
-- ARGV  base, queue, steps, read
-- Returns that job's enqueue time in seconds (a string), or false when none waits.
local k = fair_keys(ARGV[1], KEYS[1])
local queue, steps, CAPPED_READ = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local capped = {}
local members = redis.call('ZRANGE', k.capped, 0, CAPPED_READ - 1)
for _, member in ipairs(members) do
  capped[member_tenant(member)] = true
end
local more_capped = #members == CAPPED_READ and redis.call('ZCARD', k.capped) > CAPPED_READ
members = redis.call('ZRANGE', k.rated, 0, CAPPED_READ - 1)
for _, member in ipairs(members) do
  capped[member_tenant(member)] = true
end
local more_rated = #members == CAPPED_READ and redis.call('ZCARD', k.rated) > CAPPED_READ

local function held(tenant)
  if capped[tenant] then return true end
  if not more_capped and not more_rated then return false end
  local head = redis.call('LINDEX', k.prefix .. tenant, 0)
  local rate = more_rated and rate_of(head)
  if rate and select(2, rates_check(rate)) then return true end
  if not more_capped then return false end
  local slot = slot_of(head)
  for _, s in ipairs(slot and scopes(slot) or {}) do
    if not s.elastic
       and redis.call('ZCOUNT', s.holders, now_ms(), '+inf') >= effective_limit(s.limits, s.sub, s.default) then
      return true
    end
  end
  return false
end

-- `heads` holds, per tenant, a time no later than its oldest job's: a candidate's head job is read for the
-- exact time, and the walk goes on while a tenant further on may still be older (its time in heads below the
-- oldest found). Each head read counts as a step.
local passed, rank, best = 0, 0, nil
local function answer(t) return string.format('%.17g', t) end
while true do
  local batch = redis.call('ZRANGE', k.heads, rank, rank + 99, 'WITHSCORES')
  if #batch == 0 then return best and answer(best) or false end
  for i = 1, #batch, 2 do
    local tenant, at_most = batch[i], tonumber(batch[i + 1])
    if best and at_most >= best then return answer(best) end
    if passed >= steps then return answer(best and math.min(best, at_most) or at_most) end
    passed = passed + 1
    if redis.call('SISMEMBER', k.paused, tenant) == 0 and weight(k.weights, tenant, queue) ~= 0
      and not held(tenant) then
      local exact = head_time(k, tenant, at_most)
      if not best or exact < best then best = exact end
    end
  end
  rank = rank + #batch / 2
end
