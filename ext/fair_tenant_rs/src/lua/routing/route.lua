-- Registers one enqueue of a (job class, tenant) and picks the rule that fires, atomically.
-- KEYS[1]  string: a 16-byte header (when the key's TTL was last set, when the tenant's index
--          entry was last written), then enqueue times, ascending; all numbers 8-byte big-endian
--          doubles
-- KEYS[2]  hash: the class's tenant index, tenant -> newest enqueue time, packed (for stats)
-- ARGV[1]  now, as an 8-byte big-endian double
-- ARGV[2]  TTL of the tenant's key and of the index in milliseconds (decimal text): twice the
--          longest window
-- ARGV[3]  8-byte big-endian doubles: keep, the longest window in seconds, how stale the index's
--          time of a tenant may get in seconds, then (threshold, now - per) for every rule
-- ARGV[4]  the tenant
-- Returns  the 0-based index of the last rule whose window count, this job included,
--          exceeds its threshold; -1 when none does.
--
-- A rule with threshold T fires when the (T+1)-th newest enqueue is inside its window, so the
-- `keep` (= max T + 1) newest times decide every rule exactly and memory stays bounded whatever
-- the volume. Numbers arrive packed (no decimal parsing) and the window starts are precomputed by
-- the caller.
--
-- The common push costs one GET and one APPEND of 8 bytes: Redis appends in place and the script
-- builds no string. The key is rewritten (sorted, trimmed to `keep`, TTL set) only when it is new,
-- when it holds SLACK times more than `keep`, when a client's clock is behind the newest time, or
-- when its TTL was set more than half a window ago. Every push therefore leaves the key at least
-- 1.5 windows to live, and it holds at most keep + SLACK times.
local SLACK = 32
local key = KEYS[1]
local packed = ARGV[1]
local now = struct.unpack('>d', packed)
local spec = ARGV[3]
local keep, window, index_every = struct.unpack('>ddd', spec)

-- Anything but a string holding a header and whole times (nothing yet, or the sorted set
-- sidekiq-fair_tenant kept under the same name) starts afresh.
local value = redis.pcall('GET', key)
local n = -1
local ttl_set, indexed
if type(value) == 'string' and #value >= 16 and #value % 8 == 0 then
  n = #value / 8 - 2
  ttl_set, indexed = struct.unpack('>dd', value)
end
local last
if n > 0 then
  last = struct.unpack('>d', value, #value - 7)
end
-- The class's tenant index gets this tenant's time when its entry is `index_every` old (or new).
local fresh = n <= 0
local index_due = fresh or now - indexed >= index_every

local m -- times held once this one is in, as the rules see them
if n >= 0 and (n == 0 or last <= now) and n < keep + SLACK and now - ttl_set <= window / 2 then
  redis.call('APPEND', key, packed)
  if index_due then
    redis.call('SETRANGE', key, 8, packed)
  end
  m = n + 1
else
  -- Rewrite: the times held, `now` inserted in order, the newest `keep` of them.
  local times = ''
  if n > 0 then
    times = string.sub(value, 17)
  end
  local pos = n
  if pos < 0 then
    pos = 0
  end
  while pos > 0 and struct.unpack('>d', times, (pos - 1) * 8 + 1) > now do
    pos = pos - 1
  end
  times = string.sub(times, 1, pos * 8) .. packed .. string.sub(times, pos * 8 + 1)
  m = #times / 8
  if m > keep then
    times = string.sub(times, (m - keep) * 8 + 1)
    m = keep
  end
  local index_time = packed
  if not index_due then
    index_time = string.sub(value, 9, 16)
  end
  value = packed .. index_time .. times
  redis.call('PSETEX', key, ARGV[2], value)
end

-- The class's tenant index: tenant -> a recent enqueue time (packed), at most `index_every`
-- seconds older than its newest, so a busy tenant costs it one HSET (and one SETRANGE of the
-- header) every `index_every` seconds, not one a push. Its TTL is pushed out with every write.
-- Housekeeping only when a tenant joins it or becomes active again (its key was empty): a few
-- sampled entries older than the window are dropped, and past 10,000 tenants a random one is
-- (pcall: HRANDFIELD needs Redis 6.2).
if index_due then
  local index = KEYS[2]
  local added = redis.call('HSET', index, ARGV[4], packed)
  redis.call('PEXPIRE', index, ARGV[2])
  if added == 1 or fresh then
    local stale = now - window - index_every
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
end

-- The k-th newest time (k = 0: the newest) is at byte 17 + (m - 1 - k) * 8 of `value`; after an
-- APPEND the newest is `now`, which is not in `value` but is inside every window anyway.
local chosen = -1
local rule = 0
for off = 25, #spec, 16 do
  local threshold, from = struct.unpack('>dd', spec, off)
  if m > threshold
      and (threshold == 0 or struct.unpack('>d', value, (m - 1 - threshold) * 8 + 17) >= from) then
    chosen = rule
  end
  rule = rule + 1
end
return chosen
