-- Takes the next job from the first of the given queues that has one, in the order Sidekiq's queue
-- weights chose. From a fair queue: the next job in fair order, moved to the process's in-flight list
-- in the same step (a job is always in exactly one place). From a plain queue: RPOP, as BasicFetch.
-- Acknowledgements of jobs that finished since the last call come first (they ride along, so a job costs
-- one round trip: its fetch). Before both, a process missing from the registry registers again and takes
-- back the copies of its recovered jobs that still wait (ensure_registered): no fetch by a process that is
-- not registered for recovery, and none of a job the process is still running.
-- KEYS  inflight (this process's list), weights, registry (processes with in-flight lists), recovered
--       (copies of this process's recovered jobs)
-- ARGV  woken ("1": the caller already took a wake-up token), identity (this process), n, then n
--       acknowledgements: in-flight entry, timing pairs (timing "" unless the job's queue is fair by worker
--       time: charge_back's "<charged> <ran> <len>:<queue><member>"; entry "": a timing alone, its entry
--       dropped by a plain LREM), then base, queue, mode triples (base "" for a plain queue; mode "time"
--       or "")
-- An acknowledged job that held a concurrency slot gives it back (fair_caps.lua), and a tenant that waited
-- for it is served by this very call if its turn comes first; a served job with a slot takes it.
-- Returns {queue, tenant, job, entry, held, adopt, charged, member} (entry: what acknowledges it, the job at
-- its end; held: the jid when the job took its slot, else ""; adopt: 1 when the fair queue's `queue:<name>`
-- list holds jobs to adopt, else 0; charged (ms) and member: under `time`, what its timing names, else "";
-- from a fair queue job is false, the caller reads it from entry: a job crosses once; from a plain queue
-- tenant and entry are false), {queue} when a fair queue has nothing in fair order but jobs to adopt in
-- `queue:<name>`, or, when nothing was served, the ms until a rate-capped tenant may start (an Integer), or nil.
local woken = ARGV[1] == '1'
local identity = ARGV[2]
local acks = tonumber(ARGV[3])
if not acks then return redis.error_reply('ERR fetch: the count of acknowledgements must be a number') end -- before any write
local woken_by_acks = {} -- tenants a released slot woke: served by this call if their turn comes first

ensure_registered(identity, KEYS[1], KEYS[3], KEYS[4], KEYS[2])

-- The acknowledgements' charges are corrected before any of their slots is released: a tenant a release
-- wakes is noted with its tag, corrected.
local dropped = {}
for i = 4, 2 + 2 * acks, 2 do
  local found = ARGV[i] == '' or redis.call('LREM', KEYS[1], -1, ARGV[i]) == 1 -- from the tail: the oldest
  if found and ARGV[i + 1] ~= '' then charge_back(KEYS[2], ARGV[i + 1]) end
  if found and ARGV[i] ~= '' then dropped[#dropped + 1] = ARGV[i] end
end
for _, entry in ipairs(dropped) do
  local _, _, at = entry_head(entry)
  if at then release_slot(entry, woken_by_acks, at) end
end
for i = 4 + 2 * acks, #ARGV, 3 do
  local queue = ARGV[i + 1]
  if ARGV[i] == '' then
    local job = redis.call('RPOP', 'queue:' .. queue)
    if job then
      settle(woken_by_acks)
      return { queue, false, job, false, '', 0 }
    end
  else
    local k = fair_keys(ARGV[i], KEYS[2])
    k.time = ARGV[i + 2] == K_FAIR_MODE_TIME
    local tenant, job, held, charged, member = serve(k, queue, false, woken_by_acks)
    local waiting = redis.call('LLEN', 'queue:' .. queue) > 0
    if tenant then
      if not woken then redis.call('RPOP', k.sig) end
      local entry = inflight_entry(queue, tenant, job)
      redis.call('LPUSH', KEYS[1], entry)
      settle(woken_by_acks)
      return { queue, tenant, false, entry, held or '', waiting and 1 or 0,
               charged and string.format('%.17g', charged) or '', charged and member or '' }
    elseif waiting then
      settle(woken_by_acks)
      return { queue }
    end
  end
end
settle(woken_by_acks)
-- Nothing served: how long until a rate-capped tenant of these queues may start (ms), so an idle fetcher
-- does not sleep past it; else false.
local soonest = false
for i = 4 + 2 * acks, #ARGV, 3 do
  if ARGV[i] ~= '' then
    local due = rate_next(fair_keys(ARGV[i], KEYS[2]))
    if due and (not soonest or due < soonest) then soonest = due end
  end
end
return soonest
