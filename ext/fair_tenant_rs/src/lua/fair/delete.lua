-- Deletes one waiting job of a fair queue (Sidekiq::JobRecord#delete, the Web queue page's Delete): the exact
-- payload, looked for in `tenant`'s list, then, when a scan cursor is given, in the lists of the tenants one
-- ZSCAN step of `heads` returns from it (`count` hint). The scheduling state follows as when a job is
-- served: `n` drops by one; a tenant whose list empties leaves heads and ready / over / capped / paused (and
-- its waiting entry on the job's scope), its start tag kept in fin while ahead of v, so coming back it
-- starts where its next job would have; a tenant whose oldest job went has its next job's time in heads
-- and, if it was held back on the deleted job's scope, rejoins the rotation with a wake-up token (its next
-- job may need no slot, or another one).
-- KEYS  (none)
-- ARGV  base, queue, job, tenant, cursor ("": only `tenant`'s list), count
-- Returns {1, tenant} when deleted, else {0, next cursor} ("0": the scan is over, or none was asked).
local k = fair_keys(ARGV[1], '')
local queue, job = ARGV[2], ARGV[3]

local function delete_from(tenant)
  return take_waiting(k, queue, tenant, job)
end

if delete_from(ARGV[4]) then return { 1, ARGV[4] } end
if ARGV[5] == '' then return { 0, '0' } end
local step = redis.call('ZSCAN', k.heads, ARGV[5], 'COUNT', tonumber(ARGV[6]))
for i = 1, #step[2], 2 do
  local tenant = step[2][i]
  if tenant ~= ARGV[4] and delete_from(tenant) then return { 1, tenant } end
end
return { 0, step[1] }
