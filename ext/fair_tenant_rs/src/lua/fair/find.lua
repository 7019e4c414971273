-- Looks for a waiting job of a fair queue by its jid (`why`): a walk over the tenants in `heads` order,
-- each tenant's jobs oldest first, reading at most K_FIND_BATCH jobs and K_FIND_BYTES bytes a call. A job
-- FairPush wrote names its jid in its first bytes; others are searched whole.
-- KEYS  (none)
-- ARGV  base, the jid's member as the job's JSON writes it ('"jid":' and the JSON string, escapes and all),
--       cursor: tenant rank in heads, index in its list ("0", "0" to start)
-- Returns {false, tenant, index, job} when found, {rank, index} to go on from, or {} when the walk is over.
-- Tenants that come or go meanwhile shift the ranks: a job may be missed by a walk, never reported wrongly.
local k = fair_keys(ARGV[1], '')
local quoted = ARGV[2]
local rank, index = tonumber(ARGV[3]), tonumber(ARGV[4])
local read, bytes = 0, 0

-- A head without a backslash is the whole jid; one with an escape in it is searched whole.
local function matches(job)
  local head = string.match(job, '^{"enqueued_at":[%d%.eE+-]+,("jid":"[^"]*")')
  if head and not string.find(head, '\\', 1, true) then return head == quoted end
  return string.find(job, quoted, 1, true) ~= nil
end

while read < K_FIND_BATCH and bytes < K_FIND_BYTES do
  local tenant = redis.call('ZRANGE', k.heads, rank, rank)[1]
  if not tenant then return {} end
  local chunk = math.min(50, K_FIND_BATCH - read)
  local jobs = redis.call('LRANGE', k.prefix .. tenant, index, index + chunk - 1)
  for i, job in ipairs(jobs) do
    if matches(job) then return { false, tenant, index + i - 1, job } end
    bytes = bytes + #job
  end
  read = read + #jobs
  if #jobs < chunk then
    rank, index = rank + 1, 0
  else
    index = index + #jobs
  end
end
return { rank, index }
