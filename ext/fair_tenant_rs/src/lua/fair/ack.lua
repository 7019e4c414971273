-- Acknowledges (drops), requeues or recovers in-flight jobs. Payloads are moved as the bytes they are:
-- nothing here decides from a payload whether to keep it.
-- KEYS  inflight (a process's hash: field -> job, names.rs INFLIGHT_PREFIX), weights, registry, suspects, dead (Sidekiq's dead set), recovered (the
--       copies of the list's process's recovered jobs), recovering (processes whose recovery is under way)
-- ARGV  mode, identity (the list's process), now (seconds, the dead set's score), keep (seconds the copies are
--       remembered), then:
--       "ack": in-flight field, timing pairs (fetch.lua: timing "" unless fair by worker time);
--       "requeue": in-flight fields;
--       "upgrade": nothing (a format-2 in-flight list becomes a hash, below);
--       "recover": field, action, job triples. action "fair": the job (its interruption count raised, or
--       as it was) back to the front of its tenant; "plain": to the front of `queue:<name>` (the queue is
--       no longer fair); "dead": to the dead set (interrupted too often, or not a job at all).
-- "requeue"/"recover": a job going back to a fair queue goes to the *front* of its tenant's list (it runs
-- next for that tenant), the tenant is activated if it had gone idle, and idle fetchers get a wake-up token;
-- one of a queue switched off (K_FAIR_OFF_KEY) goes to the front of `queue:<name>` instead.
-- A job that held a concurrency slot gives it back, and tenants waiting on its scope are woken (with tokens).
-- "recover": each copy put back in a fair queue is remembered (recovered, for `keep` seconds). A recovery may
-- take several calls (a batch each): the first moves the process from the registry to `recovering` (it
-- leaves the registry for ever only with its last entry: the call that empties its list removes it from
-- both), and any later sweep finishes one cut short (its sweeper killed, a call refused). Nothing is written
-- unless the process may be recovered: a first call only while the process is registered, suspected and its
-- heartbeat key still gone; a later call only while it is in `recovering`. If it was only stalled, its next
-- call registers it again, leaves `recovering` and takes back the copies still waiting (ensure_registered),
-- so it does not run a job twice, and keeps the rest of its list.
-- "ack", "requeue": called by the list's own process, which registers again first if it is missing.
-- "upgrade": the in-flight list a process of a gem with format 2 left (each entry "<len>:<queue><len>:<tenant>
-- <job>") becomes this format's hash, its oldest entry given the smallest id (a recovery gives a tenant its
-- jobs back in the order it was served them); an entry this gem did not write keeps its bytes under a field
-- that is no entry ("!<id>": the recovery sends it to the dead set). Only as a recovery may go on (below),
-- and in one call (such a list holds what its process was running).
-- Returns how many fields were found in the in-flight hash (0 for a recovery that may not go on); "upgrade":
-- how many entries became fields.
local mode, identity, now = ARGV[1], ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
-- Checked before the first write (Redis keeps what a failing script wrote).
local keep_ok = finite(keep, 1) and keep == math.floor(keep) -- EXPIRE takes whole seconds
if mode ~= 'ack' and mode ~= 'requeue' and mode ~= 'recover' and mode ~= 'upgrade' then
  return redis.error_reply('ERR ack: mode must be ack, requeue, recover or upgrade')
end
if mode ~= 'ack' and (not finite(now, 0) or (mode == 'recover' and not keep_ok)) then
  return redis.error_reply('ERR ack: now (and keep, to recover) must be numbers')
end
local step = mode == 'recover' and 3 or mode == 'ack' and 2 or 1
local found = 0
if mode == 'recover' or mode == 'upgrade' then
  local go_on
  if redis.call('SISMEMBER', KEYS[7], identity) == 1 then
    go_on = redis.call('SISMEMBER', KEYS[3], identity) == 0 -- (a process that came back leaves recovering)
  else -- a first call: the process as the liveness look judged it, still
    go_on = redis.call('SISMEMBER', KEYS[3], identity) == 1 and redis.call('HEXISTS', KEYS[4], identity) == 1
      and redis.call('EXISTS', identity) == 0
  end
  if not go_on then return 0 end
  if mode == 'upgrade' then
    if redis.call('TYPE', KEYS[1]).ok ~= 'list' then return 0 end
    local entries = redis.call('LRANGE', KEYS[1], 0, -1) -- the newest first
    local last = redis.call('INCRBY', K_INFLIGHT_SEQ_KEY, #entries) -- before the DEL: a refused INCRBY loses nothing
    redis.call('DEL', KEYS[1])
    for i, entry in ipairs(entries) do
      local id = last - i + 1
      local queue, tenant, job = parse_entry(entry)
      if queue then
        redis.call('HSET', KEYS[1], inflight_entry(queue, tenant, id .. (slot_of(job) and K_INFLIGHT_SLOT_MARK or '')),
          job)
      else
        redis.call('HSET', KEYS[1], '!' .. id, entry)
      end
    end
    return #entries
  end
else
  ensure_registered(identity, KEYS[1], KEYS[3], KEYS[6], KEYS[2])
end
for i = 5, #ARGV, step do
  local field = ARGV[i]
  -- A job that took a slot is read (its scope) before its field goes, as is one requeued (it goes back); a
  -- recovery sends the job it read (its slot is the same, whatever its interruption count).
  local held = inflight_slotted(field)
  local job = mode == 'recover' and ARGV[i + 2]
    or (held or mode == 'requeue') and redis.call('HGET', KEYS[1], field) or nil
  if redis.call('HDEL', KEYS[1], field) == 1 then
    found = found + 1
    local queue, tenant = entry_head(field)
    if mode == 'ack' and ARGV[i + 1] ~= '' then charge_back(KEYS[2], ARGV[i + 1]) end
    if held and job then release_slot(job, true) end
    local action = 'fair'
    if mode == 'recover' then action = ARGV[i + 1] end
    if mode == 'ack' then
      action = nil
    elseif not queue then
      action = 'dead' -- not an entry this gem wrote: kept where it can be seen
    elseif action == 'fair' and redis.call('SISMEMBER', K_FAIR_OFF_KEY, queue) == 1 then
      action = 'plain' -- switched off (fair-off): a process still draining does not strand it in a fair list
    end
    if action == 'dead' then
      redis.call('ZADD', KEYS[5], now, job)
    elseif action == 'plain' then
      redis.call('RPUSH', 'queue:' .. queue, job)
      redis.call('SADD', 'queues', queue)
    elseif action == 'fair' then
      local k = fair_keys(fair_base(queue), KEYS[2])
      push_front(k, tenant, job, queue)
      redis.call('HINCRBY', k.state, K_STATE_N, 1)
      add_tokens(k, 1, K_TOKEN_CAP)
      if mode == 'recover' then
        redis.call('HSET', KEYS[6], field, job)
        redis.call('EXPIRE', KEYS[6], keep)
      end
    end
  end
end
if mode == 'recover' then
  redis.call('HDEL', KEYS[4], identity)
  if redis.call('HLEN', KEYS[1]) == 0 then
    redis.call('SREM', KEYS[3], identity)
    redis.call('SREM', KEYS[7], identity)
  elseif redis.call('SMOVE', KEYS[3], KEYS[7], identity) == 0 then
    redis.call('SADD', KEYS[7], identity)
  end
end
return found
