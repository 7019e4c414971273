# frozen_string_literal: true

module Conservation
  # What the harness knows of a job: pushed (or not: the push raised), its arguments, and how it ended.
  #   done       it ran and its end is in Redis (acknowledged, or a plain job that finished): never again
  #   lost_ok    a plain job in a crashed process's memory (BasicFetch's way: gone with the process)
  #   unconfirmed  it ran, but its process crashed with the acknowledgement still in memory: may run again
  #   killed     a payload that is no job (garbage), sent to the dead set by the processor that fetched it
  Job = Struct.new(:id, :queue, :klass, :args, :pushed, :done, :lost_ok, :unconfirmed, :garbage, :killed,
                   keyword_init: true)

  # A process: a FairFetch, Sidekiq's heartbeat key named by its identity, the units its threads run, and
  # the entries of units acknowledged but not yet sent (they ride with the next fetch).
  # stalled: its heartbeat key has been gone for longer than Recovery::LAPSE (time_passes): a recovery may take
  # its jobs although it lives (a stall), and they may run twice.
  # leaked: entries in its list nothing of it stands for (a lost fetch reply's, a requeue that failed), until
  # its audit puts them back; stale_leaked: those a recovery took while it stalled (their copies come back with it).
  # stopping: Sidekiq's shutdown began (graceful_stop): its threads finish what they run and fetch nothing more.
  # slots: its Slots state (SlotHeartbeats): the jobs whose leases its heartbeat renews, and that heartbeat.
  Proc = Struct.new(:identity, :fetcher, :units, :pending, :beating, :stalled, :leaked, :stale_leaked, :stopping,
                    :slots, keyword_init: true)

  # A unit of work a process runs: `entry` for a fair queue's (in its in-flight list), nil for a plain one.
  # Stale: a recovery took its entry away (a heartbeat lapse), the job may run elsewhere too.
  # scope: [tag, sub] of the concurrency slot its fetch took (a capped job; `scopes`: every one it took, each
  # [tag, sub, the limit it carries]), its `run` the server middleware
  # running it (a Fiber paused inside the job until it ends); lost: its lease was found gone while it ran.
  Held = Struct.new(:id, :unit, :entry, :stale, :scope, :run, :lost, :scopes, keyword_init: true)
end
