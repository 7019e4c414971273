-- What of a fair queue's backlog no free thread may start now, for the stats: the jobs of paused tenants (in
-- `paused`) and of tenants held back by a static cap (`capped`); apart, those of tenants over an elastic
-- cap (`over`: served only on threads no other tenant needs), and those of tenants waiting for a rate window
-- (`rated`). Jobs are counted over the first `max` tenants
-- of each set (capped and over: lowest start tags first; rated: soonest first), tenants over all of them.
-- KEYS  (none)
-- ARGV  base, max
-- Returns {paused jobs, paused tenants, held jobs, held tenants, over jobs, over tenants, rated jobs,
--          rated tenants}.
local k = fair_keys(ARGV[1], '')
local max = tonumber(ARGV[2])

local function jobs_of(tenants)
  local jobs = 0
  for _, tenant in ipairs(tenants) do
    jobs = jobs + redis.call('LLEN', k.prefix .. tenant)
  end
  return jobs
end

local paused, seen, at = {}, {}, '0'
repeat -- SSCAN may return a member twice
  local step = redis.call('SSCAN', k.paused, at, 'COUNT', 1000)
  at = step[1]
  for _, tenant in ipairs(step[2]) do
    if #paused < max and not seen[tenant] then
      seen[tenant] = true
      paused[#paused + 1] = tenant
    end
  end
until at == '0' or #paused >= max

local function tier(set)
  local tenants = {}
  for i, member in ipairs(redis.call('ZRANGE', set, 0, max - 1)) do
    tenants[i] = member_tenant(member)
  end
  return jobs_of(tenants), redis.call('ZCARD', set)
end

local held_jobs, held_tenants = tier(k.capped)
local over_jobs, over_tenants = tier(k.over)
local rated_jobs, rated_tenants = tier(k.rated)
return { jobs_of(paused), redis.call('SCARD', k.paused), held_jobs, held_tenants, over_jobs, over_tenants,
         rated_jobs, rated_tenants }
