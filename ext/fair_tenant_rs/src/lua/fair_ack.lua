-- Acknowledges (drops), requeues or recovers in-flight jobs. Payloads are moved as the bytes they are:
-- nothing here decides from a payload whether to keep it.
-- KEYS  inflight (a process's list), weights, registry, suspects, dead (Sidekiq's dead set)
-- ARGV  mode, base template (the queue's key prefix with %Q for its name), cap, identity (the list's
--       process), now (seconds, the dead set's score), then:
--       "ack", "requeue": in-flight entries;
--       "recover": entry, action, job triples. action "fair": the job (its interruption count raised, or
--       as it was) back to the front of its tenant; "plain": to the front of `queue:<name>` (the queue is
--       no longer fair); "dead": to the dead set (interrupted too often, or not a job at all).
-- "requeue"/"recover": a job going back to a fair queue goes to the *front* of its tenant's list (it runs
-- next for that tenant), the tenant is activated if it had gone idle, and idle fetchers get a wake-up token.
-- A job that held a concurrency slot gives it back, and tenants waiting on its scope are woken (with tokens).
-- "recover": a list left empty is forgotten (registry and suspects); its process re-registers with its next
-- in-flight job (fair_fetch.lua).
-- Returns how many entries were found in the in-flight list.
local mode, template, cap, identity, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local step = mode == 'recover' and 3 or 1
local found = 0
for i = 6, #ARGV, step do
  local entry = ARGV[i]
  if redis.call('LREM', KEYS[1], -1, entry) == 1 then -- from the tail, where the oldest are
    found = found + 1
    local queue, tenant, job = parse_entry(entry)
    release_slot(job, true)
    local action = 'fair'
    if mode == 'recover' then action, job = ARGV[i + 1], ARGV[i + 2] end
    if mode == 'ack' then
      action = nil
    elseif not queue then
      action = 'dead' -- not an entry this gem wrote: kept where it can be seen
      job = entry
    end
    if action == 'dead' then
      redis.call('ZADD', KEYS[5], now, job)
    elseif action == 'plain' then
      redis.call('RPUSH', 'queue:' .. queue, job)
      redis.call('SADD', 'queues', queue)
    elseif action == 'fair' then
      local k = fair_keys((template:gsub('%%Q', function() return queue end)), KEYS[2])
      push_front(k, tenant, job, queue)
      redis.call('HINCRBY', k.state, 'n', 1)
      add_tokens(k, 1, cap)
    end
  end
end
if mode == 'recover' and redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[3], identity)
  redis.call('HDEL', KEYS[4], identity)
end
return found
