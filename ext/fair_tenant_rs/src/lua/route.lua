-- Registers one enqueue of a (job class, tenant) and picks the rule that fires, atomically.
-- KEYS[1]  string: enqueue times as 8-byte big-endian doubles, ascending, at most `keep` of them
-- ARGV     now, ttl (ms), keep, then (threshold, per) for every rule in order
-- Returns  the 0-based index of the last rule whose window count, this job included,
--          exceeds its threshold; -1 when none does.
--
-- A rule with threshold T fires when the (T+1)-th newest enqueue is inside its window, so the
-- `keep` (= max T + 1) newest times decide every rule exactly and memory stays bounded whatever
-- the volume. Two Redis calls (GET, SET) keep the server time per push low.
local key = KEYS[1]
local now = tonumber(ARGV[1])
local keep = tonumber(ARGV[3])

-- Anything but a string (nothing yet, or the sorted set sidekiq-fair_tenant kept under the same
-- name) starts afresh; SET below replaces it.
local times = redis.pcall('GET', key)
if type(times) ~= 'string' or #times % 8 ~= 0 then
  times = ''
end

-- Insert `now` in order: clients' clocks and pushes interleave, but it is nearly always the newest,
-- which costs one comparison and one concatenation.
local n = #times / 8
local packed = struct.pack('>d', now)
local pos = n
while pos > 0 and struct.unpack('>d', times, (pos - 1) * 8 + 1) > now do
  pos = pos - 1
end
if pos == n and n < keep then
  times = times .. packed
elseif pos == n then
  times = string.sub(times, (n - keep + 1) * 8 + 1) .. packed
else
  times = string.sub(times, 1, pos * 8) .. packed .. string.sub(times, pos * 8 + 1)
  if n + 1 > keep then
    times = string.sub(times, (n + 1 - keep) * 8 + 1)
  end
end
n = math.min(n + 1, keep)
redis.call('SET', key, times, 'PX', ARGV[2])

local chosen = -1
for i = 4, #ARGV, 2 do
  local threshold = tonumber(ARGV[i])
  if n > threshold then
    local t = struct.unpack('>d', times, (n - threshold - 1) * 8 + 1)
    if t >= now - tonumber(ARGV[i + 1]) then
      chosen = (i - 4) / 2
    end
  end
end
return chosen
