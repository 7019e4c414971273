-- Frees a run's slot (idempotent; a release by another run of the jid frees nothing) and hands free slots to
-- the oldest parked jobs. Fair-queue tenants waiting on the scope (fair_caps.lua) get what is left.
-- With a payload (a run given up after its acquire's reply was lost: it ran without a slot), it also takes
-- back what that acquire may have left: the run's parked copy, or that copy handed over and still within
-- K_FORGET_TAIL jobs of its queue's tail (fetched already: the copy drops itself when it claims the slot).
-- Nothing of the run here: its acquire has not come yet, and takes nothing when it does (gone).
-- KEYS  holders, parked, limits, waiting, runs, waits, gone
-- ARGV  jid, lease (ms) for handed-over jobs, default limit, sub, run ('': whichever holds it)[, payload, queue]
-- Returns {jobs handed a slot, 1 when more could go now}.
local jid, run, payload = ARGV[1], ARGV[5], ARGV[6]
local s = { holders = KEYS[1], parked = KEYS[2], runs = KEYS[5], waits = KEYS[6], limits = KEYS[3], sub = ARGV[4],
            default = ARGV[3], lease = ARGV[2] }
local owner = redis.call('HGET', s.runs, jid)
local freed = 0
if owner == run or run == '' or (owner == false and not payload) then
  freed = redis.call('ZREM', s.holders, jid)
  redis.call('HDEL', s.runs, jid)
elseif payload and owner == K_HANDED .. run then
  if take_back(ARGV[7], payload) then
    freed = redis.call('ZREM', s.holders, jid)
    redis.call('HDEL', s.runs, jid)
  else
    redis.call('HSET', s.runs, jid, K_DROPPED)
  end
elseif payload and terms(s, jid) == run then
  redis.call('ZREM', s.parked, payload)
  redis.call('HDEL', s.waits, jid)
elseif payload then
  redis.call('HSET', KEYS[7], run, 1)
  redis.call('PEXPIRE', KEYS[7], K_GONE_TTL_MS)
end
-- Nobody waits: nothing to hand over (expired leases are dropped when a slot is next needed).
if freed == 0 or redis.call('EXISTS', s.parked, KEYS[4]) == 0 then
  return { 0, 0 }
end
local now = now_ms()
local handed, more = hand_over(s, now)
wake({ holders = s.holders, waiting = KEYS[4] }, effective_limit(s.limits, s.sub, s.default), true)
return { handed, more }
