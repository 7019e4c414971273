-- Acknowledges (drops), requeues or recovers in-flight jobs.
-- KEYS  inflight (a process's list), weights
-- ARGV  mode, base template (the queue's key prefix with %Q for its name), cap, then:
--       "ack", "requeue": in-flight entries;
--       "recover": entry, replacement pairs (the job with its interruption count raised; "" drops it).
-- "requeue"/"recover": the job goes back to the *front* of its tenant's list (it runs next for that
-- tenant), the tenant is activated if it had gone idle, and idle fetchers get a wake-up token.
-- A job that held a concurrency slot gives it back, and tenants waiting on its scope are woken (with tokens).
-- Returns how many entries were found in the in-flight list.
local mode, template, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local step = mode == 'recover' and 2 or 1
local found = 0
for i = 4, #ARGV, step do
  local entry = ARGV[i]
  if redis.call('LREM', KEYS[1], -1, entry) == 1 then -- from the tail, where the oldest are
    found = found + 1
    local queue, tenant, job = parse_entry(entry)
    release_slot(job, true)
    if mode == 'recover' then job = ARGV[i + 1] end
    if mode ~= 'ack' and queue and job ~= '' then
      local k = fair_keys((template:gsub('%%Q', function() return queue end)), KEYS[2])
      push_front(k, tenant, job, queue)
      redis.call('HINCRBY', k.state, 'n', 1)
      add_tokens(k, 1, cap)
    end
  end
end
return found
