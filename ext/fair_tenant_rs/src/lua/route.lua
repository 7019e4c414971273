-- Registers one enqueue of a (job class, tenant) and picks the rule that fires, atomically.
-- KEYS[1]  string: enqueue times as 8-byte big-endian doubles, ascending, at most `keep` of them
-- KEYS[2]  hash: the class's tenant index, tenant -> newest enqueue time, packed (for stats)
-- ARGV[1]  now, as an 8-byte big-endian double
-- ARGV[2]  TTL of the tenant's key in milliseconds (decimal text); the index keeps twice that
-- ARGV[3]  8-byte big-endian doubles: keep, then (threshold, now - per) for every rule in order
-- ARGV[4]  the tenant
-- Returns  the 0-based index of the last rule whose window count, this job included,
--          exceeds its threshold; -1 when none does.
--
-- A rule with threshold T fires when the (T+1)-th newest enqueue is inside its window, so the
-- `keep` (= max T + 1) newest times decide every rule exactly and memory stays bounded whatever
-- the volume. Numbers arrive packed (no decimal parsing) and the window starts are precomputed
-- by the caller: per push the script does two Redis calls (GET, PSETEX) and builds one string.
local key = KEYS[1]
local packed = ARGV[1]
local now = struct.unpack('>d', packed)
local spec = ARGV[3]
local keep = struct.unpack('>d', spec)

-- Anything but a string (nothing yet, or the sorted set sidekiq-fair_tenant kept under the same
-- name) starts afresh; PSETEX below replaces it.
local times = redis.pcall('GET', key)
if type(times) ~= 'string' or #times % 8 ~= 0 then
  times = ''
end

-- Insert `now` in order: clients' clocks and pushes interleave, but it is nearly always the newest,
-- which costs one comparison and one concatenation.
local n = #times / 8
local fresh = n == 0
if n == 0 then
  times = packed
elseif struct.unpack('>d', times, #times - 7) <= now then
  if n < keep then
    times = times .. packed
  else
    times = string.sub(times, (n - keep + 1) * 8 + 1) .. packed
  end
else
  local pos = n - 1
  while pos > 0 and struct.unpack('>d', times, (pos - 1) * 8 + 1) > now do
    pos = pos - 1
  end
  times = string.sub(times, 1, pos * 8) .. packed .. string.sub(times, pos * 8 + 1)
  if n + 1 > keep then
    times = string.sub(times, (n + 1 - keep) * 8 + 1)
  end
end
if n < keep then
  n = n + 1
else
  n = keep
end
redis.call('PSETEX', key, ARGV[2], times)

-- The class's tenant index: tenant -> its newest enqueue time (packed), one HSET per push.
-- Housekeeping only when a tenant joins it or becomes active again (its key was empty): the
-- index's TTL is pushed to twice the window, a few sampled entries older than the window are
-- dropped, and past 10,000 tenants a random one is (pcall: HRANDFIELD needs Redis 6.2).
local index = KEYS[2]
if redis.call('HSET', index, ARGV[4], packed) == 1 or fresh then
  local ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', index, ttl * 2)
  local stale = now - ttl / 1000
  local sample = redis.pcall('HRANDFIELD', index, 8, 'WITHVALUES')
  if type(sample) == 'table' then
    for i = 1, #sample, 2 do
      local v = sample[i + 1]
      if #v ~= 8 or struct.unpack('>d', v) < stale then
        redis.call('HDEL', index, sample[i])
      end
    end
    if redis.call('HLEN', index) > 10000 then
      redis.call('HDEL', index, redis.call('HRANDFIELD', index))
    end
  end
end

local chosen = -1
local rule = 0
for off = 9, #spec, 16 do
  local threshold, from = struct.unpack('>dd', spec, off)
  if n > threshold and struct.unpack('>d', times, (n - threshold - 1) * 8 + 1) >= from then
    chosen = rule
  end
  rule = rule + 1
end
return chosen
