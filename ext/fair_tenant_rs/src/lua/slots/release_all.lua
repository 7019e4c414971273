-- Frees a run's slots of a job of several scopes on a plain queue (acquire_all.lua), or, with a payload, gives back
-- what a run whose acquire_all reply was lost may have taken: its slots, its parked copy, or that copy handed
-- over (taken back from the queue's tail when it is still there, else marked dropped in every scope: the copy
-- drops itself when it claims them). Nothing of the run anywhere: its acquire has not come yet (gone).
-- KEYS  per scope, 8 (several.lua)
-- ARGV  jid, run, payload or '', queue or '', then per scope, 4 (several.lua)
-- Returns {jobs handed a slot, 1 when more could go now}.
local jid, run, payload, queue = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local scopes = several(5)
local handed, more = 0, 0
local function freed(n, left)
  handed, more = handed + n, math.max(more, left)
end

local owners, ran, copy = {}, false, false
for i, s in ipairs(scopes) do
  owners[i] = redis.call('HGET', s.runs, jid)
  if owners[i] == run then ran = true end
  if owners[i] == K_HANDED .. run then copy = true end
end
if payload == '' or ran then
  for i, s in ipairs(scopes) do
    if owners[i] == run then freed(free_as(s, jid, run)) end
  end
elseif copy then
  local back = take_back(queue, payload)
  for i, s in ipairs(scopes) do
    if owners[i] == K_HANDED .. run then
      if back then freed(free_as(s, jid, owners[i])) else redis.call('HSET', s.runs, jid, K_DROPPED) end
    end
  end
else
  local parked = false
  for _, s in ipairs(scopes) do
    if terms(s, jid) == run then
      redis.call('ZREM', s.parked, payload)
      redis.call('HDEL', s.waits, jid)
      redis.call('HDEL', others_key(s), jid)
      parked = true
    end
  end
  if not parked then mark_gone(scopes[1].gone, run) end
end
return { handed, more }
