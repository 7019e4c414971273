-- Shared by acquire_all.lua and release_all.lua (a job of several scopes on a plain queue, issue 32).
-- KEYS  per scope, 8: holders, parked, limits, waiting, runs, waits, gone (give_back's 7), meta
-- ARGV  from `first`, per scope, 4: lease (ms), default limit, sub, tag
-- Returns the scopes, in the order the job's option names them.
local function several(first)
  local scopes = {}
  for i = 0, #KEYS / 8 - 1 do
    local k, a = i * 8, first + i * 4
    scopes[#scopes + 1] = {
      k = { unpack(KEYS, k + 1, k + 7) }, holders = KEYS[k + 1], parked = KEYS[k + 2], limits = KEYS[k + 3],
      waiting = KEYS[k + 4], runs = KEYS[k + 5], waits = KEYS[k + 6], gone = KEYS[k + 7], meta = KEYS[k + 8],
      lease = ARGV[a], default = ARGV[a + 1], sub = ARGV[a + 2], tag = ARGV[a + 3],
    }
  end
  return scopes
end

-- Frees the jid's slot of scope `s` held as `owner` (a run, or K_HANDED/K_DROPPED and a run), handing it over
-- (give_back). Returns the jobs handed a slot and 1 when more could go now.
local function free_as(s, jid, owner)
  return give_back(s.k, { jid, s.lease, s.default, s.sub, owner })
end
