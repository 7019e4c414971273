-- Frees a run's slot, or gives back what a run whose acquire's reply was lost may have taken (give_back.lua).
-- KEYS  holders, parked, limits, waiting, runs, waits, gone
-- ARGV  jid, lease (ms) for handed-over jobs, default limit, sub, run ('': whichever holds it)[, payload, queue]
-- Returns {jobs handed a slot, 1 when more could go now}.
local handed, more = give_back(KEYS, ARGV)
return { handed, more }
