# frozen_string_literal: true

require "spec_helper"
require_relative "../support/capped_fair"

# A slot belongs to the run that holds it, whichever path took it: a plain queue's run (the server middleware's
# acquire, runs hash) or a fair queue's fetch (serve.lua, no run recorded). A plain run whose lease was lost
# (a stalled process: its lease ran out and was reclaimed) and whose release comes late (Releases keeps it for
# the thread's next acquire) must not free the slot a fair fetch has taken since for another copy of its jid:
# that copy runs on, and another job of the scope would start past the limit. Real redis-server, real scripts.
RSpec.describe "Concurrency slots of a jid run on a plain queue, then fetched from a fair queue" do
  let(:calls) { Sidekiq::FairTenant::Concurrency::SlotCalls }
  let(:fetch) { Sidekiq::FairTenant::FairFetch.new(queues: %w[fair]) }

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }
  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  # The scope a ShownStaticCapJob of tenant "acme" takes in a fair queue (limit 1), as its fetch reads it.
  def scope = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "fair")
  def slot(jid, run) = Sidekiq::FairTenant::ServerMiddleware::Slot.new(*scope, jid, 60_000, 1, run)
  def payload(jid) = JSON.generate("class" => "ShownStaticCapJob", "queue" => "fair", "jid" => jid, "args" => ["acme"])
  def holders = Sidekiq::FairTenant.stats.scope(*scope)[:holders].map { |h| h[:jid] }
  def holders_key = "sidekiq-fair_tenant:slots:#{scope[0].bytesize}:#{scope[0]}:#{scope[1]}:holders"
  def push(jid) = Sidekiq::Client.push("class" => ShownStaticCapJob, "args" => ["acme", jid], "jid" => jid)

  # The lease of the jid's slot runs out (its process stalled: no heartbeat renewed it).
  def lease_runs_out(jid) = redis.zadd(holders_key, 1, jid, xx: true)

  def served_jid
    unit = fetch.retrieve_work
    unit && JSON.parse(unit.job)["jid"]
  end

  it "has a fair fetch take its slot with the scope a plain run of the class takes" do
    push("j")
    expect(served_jid).to eq("j")
    expect(holders).to eq(["j"])
  end

  it "keeps a fair fetch's slot when a late release of a plain run whose lease was reclaimed comes" do
    expect(calls.acquire(slot("j", "r1"), payload("j"), 1.0)).to eq(:acquired)
    lease_runs_out("j")
    expect(calls.acquire(slot("k", "rk"), payload("k"), 2.0)).to eq(:acquired) # reclaims j's lease (and its run)
    calls.release(slot("k", "rk"))
    push("j") # a copy of j (pushed back while r1 still ran it), in the fair queue
    push("other")
    expect(served_jid).to eq("j")
    expect(holders).to eq(["j"])

    calls.release(slot("j", "r1")) # r1's release, kept for its thread's next acquire, comes now
    expect(holders).to eq(["j"]) # the fair copy still runs
    expect(served_jid).to be_nil # the scope is full: "other" waits
  end

  it "keeps it when the fair fetch itself reclaimed the plain run's lease" do
    expect(calls.acquire(slot("j", "r1"), payload("j"), 1.0)).to eq(:acquired)
    lease_runs_out("j")
    push("j")
    push("other")
    expect(served_jid).to eq("j") # the scope looked full: the expired lease was dropped, and j took the slot
    expect(holders).to eq(["j"])

    calls.release(slot("j", "r1"))
    expect(holders).to eq(["j"])
    expect(served_jid).to be_nil
  end

  it "keeps it when the plain run's release rides with the thread's next acquire" do
    expect(calls.acquire(slot("j", "r1"), payload("j"), 1.0)).to eq(:acquired)
    lease_runs_out("j")
    push("j")
    push("other")
    expect(served_jid).to eq("j")

    carried = slot("j", "r1")
    expect(calls.take(slot("n", "rn"), payload("n"), 3.0, carried).first).to eq(:parked) # j's copy runs
    expect(holders).to eq(["j"])
  end

  it "still frees the slot when the fair copy is acknowledged, and a release by the holding run" do
    push("j")
    unit = fetch.retrieve_work
    unit.acknowledge
    fetch.flush_acks
    expect(holders).to be_empty

    expect(calls.acquire(slot("p", "rp"), payload("p"), 1.0)).to eq(:acquired)
    calls.release(slot("p", "rp"))
    expect(holders).to be_empty
  end
end
