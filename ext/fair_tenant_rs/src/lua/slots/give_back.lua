-- A run's release (release.lua's body, and the release an acquire carries for the thread's previous job): frees
-- the run's slot (idempotent; a release by another run of the jid frees nothing) and hands free slots to the
-- oldest parked jobs. Fair-queue tenants waiting on the scope (fair/serve.lua's wake) get what is left. Only
-- the run that holds the slot frees it: a holder with no run recorded is a fair-queue fetch's (its job's
-- acknowledgement, requeue or recovery frees it), or was taken again after a reclaim dropped this run's lease;
-- a release naming a run frees neither ('' names whichever holds it). Every run that holds a slot has its run
-- recorded: its acquire writes it, adopting a holder with none (a hand-over by a version that wrote none).
-- With a payload (a run given up after its acquire's reply was lost: it ran without a slot), it also takes
-- back what that acquire may have left: the run's parked copy, or that copy handed over and still within
-- K_FORGET_TAIL jobs of its queue's tail (fetched already: the copy drops itself when it claims the slot).
-- Nothing of the run here: its acquire has not come yet, and takes nothing when it does (gone).
-- k  holders, parked, limits, waiting, runs, waits, gone
-- a  jid, lease (ms) for handed-over jobs, default limit, sub, run ('': whichever holds it)[, payload, queue]
-- Returns the jobs handed a slot and 1 when more could go now.
-- A run given up (a lost acquire reply): its acquire, when it comes, takes nothing (kept K_GONE_TTL_MS).
local function mark_gone(gone, run)
  redis.call('HSET', gone, run, 1)
  redis.call('PEXPIRE', gone, K_GONE_TTL_MS)
end

-- The run that parked a handed-over copy (`owner`: K_HANDED .. it) when another run claims it, or nil: the claim
-- served that run's park, so it is marked gone (mark_gone) and a re-send of its call (its reply lost) takes
-- nothing when it comes (it would park the job again, which would run twice).
local function parking_run(owner, run)
  if owner and #owner > #K_HANDED and string.sub(owner, 1, 1) == K_HANDED and owner ~= K_HANDED .. run then
    return string.sub(owner, #K_HANDED + 1)
  end
  return nil
end

local function give_back(k, a)
  local jid, run, payload = a[1], a[5], a[6]
  local s = { holders = k[1], parked = k[2], runs = k[5], waits = k[6], limits = k[3], sub = a[4],
              default = a[3], lease = a[2] }
  local owner = redis.call('HGET', s.runs, jid)
  local freed = 0
  if owner == run or run == '' then
    freed = redis.call('ZREM', s.holders, jid)
    redis.call('HDEL', s.runs, jid)
  elseif payload and owner == K_HANDED .. run then
    if take_back(a[7], payload) then
      freed = redis.call('ZREM', s.holders, jid)
      redis.call('HDEL', s.runs, jid)
    else
      redis.call('HSET', s.runs, jid, K_DROPPED)
    end
  elseif payload and terms(s, jid) == run then
    redis.call('ZREM', s.parked, payload)
    redis.call('HDEL', s.waits, jid)
  elseif payload then
    mark_gone(k[7], run)
  end
  -- Nobody waits: nothing to hand over (expired leases are dropped when a slot is next needed).
  if freed == 0 or redis.call('EXISTS', s.parked, k[4]) == 0 then
    return 0, 0
  end
  local handed, more = hand_over(s, now_ms())
  fair_wake({ holders = s.holders, waiting = k[4] }, effective_limit(s.limits, s.sub, s.default), true)
  return handed, more
end
